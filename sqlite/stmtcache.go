package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"sync"

	sqlite "modernc.org/sqlite"
)

// SQLite compiles a statement before it runs it, and a statement that
// writes readpast_jobs compiles the table's triggers with it: a one-row
// DELETE costs about 0.6 ms compiled afresh and 8 us compiled once.
// database/sql asks the driver to compile every ExecContext and
// QueryContext anew, so the store's connections keep what they compiled:
// each connection holds up to stmtCacheMax compiled statements by their
// text, and runs a text it holds again without compiling it. A connection
// that database/sql's Conn.Raw hands out is this wrapper, not the
// driver's own. The driver
// resets a statement (and drops its bindings) when its rows close, so a
// kept statement holds no lock and no snapshot between runs; SQLite
// compiles one again by itself when the schema changed.

// stmtCacheMax bounds the statements a connection keeps: past it, the
// one run longest ago is dropped. stmtTextMax bounds the text of a kept
// statement: a longer one (a multi-row INSERT, whose text grows with its
// rows and whose compiled form can take a megabyte) is compiled for each
// run, as without the cache.
const (
	stmtCacheMax = 256
	stmtTextMax  = 8 << 10
)

// openDB opens a database/sql pool on the SQLite database named by dsn
// whose connections keep their compiled statements.
func openDB(dsn string) (*sql.DB, error) {
	base, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(cachingConnector{base}), nil
}

// cachingConnector wraps the connections of modernc.org/sqlite's
// connector in cachingConn.
type cachingConnector struct{ driver.Connector }

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newCachingConn(conn), nil
}

// sqliteConn is what database/sql uses of a modernc.org/sqlite connection.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is a connection that keeps the statements it compiled.
// database/sql uses a connection from one goroutine at a time, but rows
// of a statement can still be open when the same text runs again (a
// query run while another's rows are read): a statement in use is not
// shared, and that run compiles the text afresh.
type cachingConn struct {
	sqliteConn

	mu    sync.Mutex // the rows' Close runs on the reader's goroutine
	stmts map[string]*cachedStmt
	runs  uint64 // counts takes, for lastRun
}

// compiledStmt is what the driver's prepared statements offer.
type compiledStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// cachedStmt is a compiled statement, whether rows of it are open, and
// when it last ran (cachingConn.runs then).
type cachedStmt struct {
	stmt    compiledStmt
	busy    bool
	lastRun uint64
}

func newCachingConn(conn driver.Conn) driver.Conn {
	c, ok := conn.(sqliteConn)
	if !ok {
		return conn // a driver that changed: no cache
	}
	return &cachingConn{sqliteConn: c, stmts: map[string]*cachedStmt{}}
}

// take returns the compiled statement for query, marked busy, compiling
// and keeping it; nil when it is in use or its text is too long to keep.
func (c *cachingConn) take(ctx context.Context, query string) (*cachedStmt, error) {
	if len(query) > stmtTextMax {
		return nil, nil
	}
	c.mu.Lock()
	c.runs++
	if cs, ok := c.stmts[query]; ok {
		defer c.mu.Unlock()
		if cs.busy {
			return nil, nil
		}
		cs.busy, cs.lastRun = true, c.runs
		return cs, nil
	}
	c.mu.Unlock()
	ds, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := ds.(compiledStmt)
	if !ok {
		ds.Close()
		return nil, nil
	}
	cs := &cachedStmt{stmt: st, busy: true}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stmts) >= stmtCacheMax {
		c.dropOldest()
	}
	cs.lastRun = c.runs
	c.stmts[query] = cs
	return cs, nil
}

// dropOldest closes the kept statement that ran longest ago and is not in
// use. c.mu is held.
func (c *cachingConn) dropOldest() {
	var (
		oldest string
		found  *cachedStmt
	)
	for q, cs := range c.stmts {
		if !cs.busy && (found == nil || cs.lastRun < found.lastRun) {
			oldest, found = q, cs
		}
	}
	if found != nil {
		found.stmt.Close()
		delete(c.stmts, oldest)
	}
}

func (c *cachingConn) release(cs *cachedStmt) {
	c.mu.Lock()
	cs.busy = false
	c.mu.Unlock()
}

// ExecContext runs query on its kept statement.
func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cs, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.sqliteConn.ExecContext(ctx, query, args)
	}
	defer c.release(cs)
	return cs.stmt.ExecContext(ctx, args)
}

// QueryContext runs query on its kept statement, which stays in use until
// the rows close.
func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cs, err := c.take(ctx, query)
	if err != nil {
		return nil, err
	}
	if cs == nil {
		return c.sqliteConn.QueryContext(ctx, query, args)
	}
	rows, err := cs.stmt.QueryContext(ctx, args)
	if err != nil {
		c.release(cs)
		return nil, err
	}
	return &cachedRows{Rows: rows, done: func() { c.release(cs) }}, nil
}

// Close closes the kept statements, then the connection.
func (c *cachingConn) Close() error {
	c.mu.Lock()
	for q, cs := range c.stmts {
		cs.stmt.Close()
		delete(c.stmts, q)
	}
	c.mu.Unlock()
	return c.sqliteConn.Close()
}

// cachedRows gives its statement back when closed. It answers what
// Rows.ColumnTypes asks as the driver's rows do.
type cachedRows struct {
	driver.Rows
	once sync.Once
	done func()
}

func (r *cachedRows) Close() error {
	err := r.Rows.Close()
	r.once.Do(r.done)
	return err
}

func (r *cachedRows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.Rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *cachedRows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *cachedRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *cachedRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.Rows.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

func (r *cachedRows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.Rows.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return reflect.TypeFor[any]()
}
