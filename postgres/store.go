// Package postgres is the PostgreSQL store of readpast, on pgx v5.
//
// Any number of workers on any number of hosts share one database. Claims
// use FOR UPDATE SKIP LOCKED, so claimers never wait on each other; the
// statements live in sql/*.sql beside this file, each with a comment on
// what it locks and why.
//
// # Use
//
// [Open] connects to a database URL with a pool the store owns; [New]
// works on the caller's *pgxpool.Pool. Run [Store.Migrate] once per
// schema version (or `readpast migrate`) before the store is used: it is
// safe from several processes at once. Then give the store to
// readpast.NewClient, or call its readpast.Store methods directly.
//
// [Store.EnqueueTx] and [Store.CompleteTx] join the caller's pgx.Tx, and
// [Store.EnqueueSQLTx] and [Store.CompleteSQLTx] a database/sql
// transaction on pgx's stdlib driver: the jobs exist, or the completion
// stands, only if the caller's transaction commits.
//
// Claimers are woken through LISTEN/NOTIFY when jobs are enqueued or
// become due ([Store.Subscribe]), and poll besides. Behind a pooler in
// transaction mode (PgBouncer) add default_query_exec_mode=exec and
// readpast_listen=off ([ListenParam]) to the URL (see [Open]).
//
// The store keeps its churning tables small between autovacuums
// ([Store.Tidy], which readpast.RunRescuer calls) when its role owns the
// tables. A database that cannot be reached is an error wrapping
// readpast.ErrUnavailable ([IsUnavailable]).
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/migrate"
	"github.com/readpast/readpast/internal/wake"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Store is a readpast.Store on PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool

	// closeCtx ends the listener when the store closes.
	closeCtx context.Context
	close    context.CancelFunc

	listenOnce sync.Once
	hub        *wake.Hub     // local subscribers, woken by this store and by NOTIFY
	backlog    chan struct{} // FlowBacklog: woken by NOTIFY 'backlog'
	noListen   bool          // readpast_listen=off: local wake-ups only

	// hotMode runs the hot-path statements sent as they are (fail,
	// release, rescue, and the claim and completion inside a caller's
	// transaction): see hotExecMode.
	hotMode pgx.QueryExecMode
	// routineMode runs the calls of the claim and completion routines:
	// see routineExecMode.
	routineMode pgx.QueryExecMode

	tidy tidier // when Tidy may vacuum each table next

	claimFrom  claimFrom  // where each queue's next claim starts (claimfrom.go)
	rescueFrom rescueFrom // where the next lease-expiry scan starts (claimfrom.go)

	notify *notifier // coalesces Enqueue's wake-ups of other processes
	echoes *echoes   // lets its listener pass over the NOTIFY of its own enqueues
	enq    *enqueuer // coalesces concurrent Enqueue calls into shared statements

	// bulkWait bounds how long a bulk action waits, in all, for rows
	// other transactions hold (0: defaultBulkWait; bulk.go).
	bulkWait time.Duration
	// claimInTx is set once a claim found its session's isolation
	// stricter than READ COMMITTED: claims then run in READ COMMITTED
	// transactions of their own (claimReadCommitted).
	claimInTx atomic.Bool

	more   claimMore    // wakes claimers after short claims of keyed jobs (claimmore.go)
	due    *wake.Alarm  // wakes claimers when jobs written for later become due (due.go)
	dueOut dueAnnouncer // tells other processes those times
	out    outbox       // the NOTIFYs sent after commits, which Close waits for (outbox.go)
}

var (
	_ readpast.Store           = (*Store)(nil)
	_ readpast.Notifier        = (*Store)(nil)
	_ readpast.SchemaVersioner = (*Store)(nil)
	_ readpast.Tidier          = (*Store)(nil)
)

// DefaultConnectTimeout bounds each connection attempt (dial, TLS and
// start-up) when the URL has no connect_timeout, so that a host that
// accepts connections and never answers fails instead of hanging.
const DefaultConnectTimeout = 10 * time.Second

// DefaultPingTimeout bounds the ping with which the pool checks a
// connection that sat idle before handing it out, when the URL has no
// pool_ping_timeout: a connection left half-open (its peer gone without
// a reset) then fails its ping and is replaced, where an unbounded ping
// would hold the call, and Close, for as long as the caller's context
// allows, or a minute for a ping the call gave up on.
const DefaultPingTimeout = 5 * time.Second

// Open connects to the database at url (a postgres:// URL or key=value
// DSN) with a pool the store owns and closes. Without connect_timeout in
// the URL, each connection attempt is bounded by DefaultConnectTimeout,
// and without pool_ping_timeout each check of an idle connection by
// DefaultPingTimeout. A
// database that cannot be reached is an error wrapping
// readpast.ErrUnavailable.
//
// Behind a pooler in transaction mode (PgBouncer), where consecutive
// round trips of one connection may reach different server sessions, add
// default_query_exec_mode=exec (pgx's own parameter: no prepared
// statement of any kind, which the hot paths then follow too, see New)
// and readpast_listen=off (readpast's, removed before connecting: no
// LISTEN session, so workers poll). See docs/faults.md.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	listen := true
	if v, ok := cfg.ConnConfig.RuntimeParams[ListenParam]; ok {
		delete(cfg.ConnConfig.RuntimeParams, ListenParam)
		switch strings.ToLower(v) {
		case "on", "true", "1":
		case "off", "false", "0":
			listen = false
		default:
			return nil, fmt.Errorf("parse database url: %s=%q: want on or off", ListenParam, v)
		}
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.PingTimeout == 0 {
		cfg.PingTimeout = DefaultPingTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", classify(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect: %w", classify(err))
	}
	s := New(pool)
	s.ownPool = true
	s.noListen = !listen
	return s, nil
}

// ListenParam is the URL parameter that turns LISTEN off
// (readpast_listen=off), for databases behind a transaction-mode pooler.
// Open removes it before connecting.
const ListenParam = "readpast_listen"

// New makes a store on the caller's pool, which Close leaves open. Jobs
// enqueued with EnqueueTx must use a transaction of a connection to the
// same database.
//
// The hot-path statements run in the pool's default_query_exec_mode when
// that is exec, simple_protocol or cache_describe (modes whose every
// statement is one round trip on the unnamed statement, which a pooler in
// transaction mode passes through), and in describe_exec otherwise (two
// round trips, exact types, safe under concurrent schema changes, but the
// second round trip may reach another server session behind a pooler).
// Either way PostgreSQL plans them with their actual parameters. The
// calls of the claim and completion routines, whose statements each server
// session plans once anyway, are prepared statements under cache_statement
// (pgx's default): see routineExecMode.
func New(pool *pgxpool.Pool) *Store {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{pool: pool, closeCtx: ctx, close: cancel, hub: wake.New(), backlog: make(chan struct{}, 1),
		hotMode:     hotExecMode(pool.Config().ConnConfig.DefaultQueryExecMode),
		routineMode: routineExecMode(pool.Config().ConnConfig.DefaultQueryExecMode)}
	s.echoes = &echoes{prefix: echoPrefix + uuid.NewString()}
	s.notify = &notifier{every: notifyEvery, send: func(own bool) { s.out.run(func() { s.sendNotify(own) }) }}
	s.enq = &enqueuer{write: s.insert}
	s.claimFrom.wake = s.hub.Broadcast
	s.due = wake.NewAlarm(s.pendingAgain)
	s.dueOut.send = func(payload string) { s.out.run(func() { s.sendDue(payload) }) }
	return s
}

// hotExecMode is the mode of the hot-path statements given the pool's
// default mode (see New).
func hotExecMode(def pgx.QueryExecMode) pgx.QueryExecMode {
	switch def {
	case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeCacheDescribe:
		return def
	}
	return pgx.QueryExecModeDescribeExec
}

// Pool returns the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close sends the wake-ups of the store's last writes that were still to
// be sent, waiting up to a second for them and for the claims,
// completions and failures in flight, stops the listener, closes every
// Subscribe channel, and closes the pool if the store opened it. The
// store must not be used once Close began: a write that does may leave
// other processes' workers to their poll, as one whose process is killed
// after its commit does.
func (s *Store) Close() error {
	// The wake-ups of the last writes, which other processes would
	// otherwise find only at their poll.
	flushed := s.out.beginClose()
	s.notify.flush()
	s.dueOut.flush()
	flushed()
	s.out.close(closeSendWait)
	s.close() // cancels the sends still running
	s.out.waitSends()
	s.due.Stop()
	s.hub.Close()
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// migrations reads the embedded migrations (internal/migrate).
func migrations() ([]migrate.Migration, error) {
	return migrate.Load(migrationFiles, "migrations")
}

// migrateLockKey serializes concurrent Migrate calls (an advisory lock id).
const migrateLockKey = 0x72656164706173 // "readpas"

const createSchemaTable = `CREATE TABLE IF NOT EXISTS readpast_schema (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// Migrate applies the embedded migrations not yet applied, and defines
// this build's routines (see routines.go), in one transaction, under an
// advisory lock so concurrent callers wait for each other. It returns readpast.ErrSchemaTooNew, changing nothing, when the
// database has a migration this code does not know.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockKey)); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, createSchemaTable); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM readpast_schema").Scan(&current); err != nil {
			return fmt.Errorf("migrate: read version: %w", err)
		}
		if latest := migrate.Latest(ms); current > latest {
			return fmt.Errorf("migrate: database at version %d, this readpast knows %d: %w", current, latest, readpast.ErrSchemaTooNew)
		}
		for _, m := range ms {
			if m.Version <= current {
				continue
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO readpast_schema (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
				return fmt.Errorf("migrate: record %s: %w", m.Name, err)
			}
		}
		if err := defineRoutines(ctx, tx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	})
}

// SchemaVersion reports the database's schema version (0 before the first
// migration) and the latest version this code knows.
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, 0, err
	}
	latest = migrate.Latest(ms)
	err = s.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM readpast_schema").Scan(&current)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return 0, latest, nil
	}
	if err != nil {
		return 0, latest, fmt.Errorf("read schema version: %w", err)
	}
	return current, latest, nil
}
