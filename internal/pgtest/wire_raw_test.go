package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func rawConn(t *testing.T, proxied string) (*pgconn.PgConn, *pgproto3.Frontend) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, proxied)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	pc := conn.PgConn()
	return pc, pc.Frontend()
}

// rawRound sends msgs, then reads until want ReadyForQuery messages
// (or a timeout), returning the statuses and the error messages seen.
func rawRound(t *testing.T, pc *pgconn.PgConn, fe *pgproto3.Frontend, want int, msgs ...pgproto3.FrontendMessage) (string, []string) {
	t.Helper()
	for _, m := range msgs {
		fe.Send(m)
	}
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	pc.Conn().SetReadDeadline(time.Now().Add(2 * time.Second))
	defer pc.Conn().SetReadDeadline(time.Time{})
	var statuses string
	var errs []string
	for len(statuses) < want {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("after %q: %v", statuses, err)
		}
		switch m := m.(type) {
		case *pgproto3.ReadyForQuery:
			statuses += string(m.TxStatus)
		case *pgproto3.ErrorResponse:
			errs = append(errs, m.Message)
		}
	}
	return statuses, errs
}

// rawSplitAfter runs a real split (s1 parsed in a round trip of its
// own, bound in a later transaction) and reports whether the watch saw it.
func rawSplitAfter(t *testing.T, w *SplitWatch, pc *pgconn.PgConn, fe *pgproto3.Frontend) {
	t.Helper()
	before := len(w.Splits())
	rawRound(t, pc, fe, 1, &pgproto3.Parse{Name: "s1", Query: "SELECT 1 /* parsed alone */"}, &pgproto3.Sync{})
	rawRound(t, pc, fe, 1, &pgproto3.Query{String: "BEGIN"})
	st, errs := rawRound(t, pc, fe, 1, &pgproto3.Bind{PreparedStatement: "s1"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	rawRound(t, pc, fe, 1, &pgproto3.Query{String: "COMMIT"})
	time.Sleep(50 * time.Millisecond)
	got := w.Splits()[before:]
	t.Logf("bind in a later transaction: status %q errors %q, recorded %q", st, errs, got)
	if len(got) == 0 {
		t.Errorf("false negative: s1 parsed in one span and bound in a later transaction was not recorded")
	}
}

// recordedUnsupported reports whether w recorded a sequence it cannot
// follow.
func recordedUnsupported(w *SplitWatch) bool {
	for _, s := range w.Splits() {
		if strings.HasPrefix(s, "pgtest: unsupported") {
			return true
		}
	}
	return false
}

func TestSplitWatchRawControl(t *testing.T) {
	w, proxied, _ := advSetup(t)
	pc, fe := rawConn(t, proxied)
	rawSplitAfter(t, w, pc, fe)
}

// A Query sent after an extended-protocol error, before the Sync, is
// discarded by the server: two groups, one ReadyForQuery.
func TestSplitWatchRawDiscardedQueryShift(t *testing.T) {
	w, proxied, _ := advSetup(t)
	pc, fe := rawConn(t, proxied)
	st, errs := rawRound(t, pc, fe, 1,
		&pgproto3.Parse{Query: "SELEC 1"}, &pgproto3.Query{String: "SELECT 1"}, &pgproto3.Sync{})
	t.Logf("Parse(error) Query Sync: statuses %q errors %q", st, errs)
	if !recordedUnsupported(w) {
		t.Errorf("a Query among extended-protocol messages was not recorded as unsupported: %q", w.Splits())
	}
	rawSplitAfter(t, w, pc, fe)
}

// libpq's extended-protocol COPY FROM STDIN: the Sync after Execute is
// ignored in copy-in mode, the one after CopyDone answered.
func TestSplitWatchRawCopyExtendedShift(t *testing.T) {
	w, proxied, _ := advSetup(t)
	pc, fe := rawConn(t, proxied)
	rawRound(t, pc, fe, 1, &pgproto3.Query{String: "CREATE TABLE rc (a int)"})
	st, errs := rawRound(t, pc, fe, 1,
		&pgproto3.Parse{Query: "COPY rc FROM STDIN"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{},
		&pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}, &pgproto3.Sync{})
	t.Logf("extended COPY with two Syncs: statuses %q errors %q", st, errs)
	if !recordedUnsupported(w) {
		t.Errorf("COPY through the extended protocol was not recorded as unsupported: %q", w.Splits())
	}
	rawSplitAfter(t, w, pc, fe)
}

// A Parse discarded after an error in its group is taken as parsed.
func TestSplitWatchRawDiscardedParse(t *testing.T) {
	w, proxied, _ := advSetup(t)
	pc, fe := rawConn(t, proxied)
	rawRound(t, pc, fe, 1, &pgproto3.Parse{Name: "s", Query: "SELECT 1 /* span A */"}, &pgproto3.Sync{})
	rawRound(t, pc, fe, 1, &pgproto3.Query{String: "BEGIN; SAVEPOINT a"})
	rawRound(t, pc, fe, 1, &pgproto3.Parse{Query: "SELEC"},
		&pgproto3.Parse{Name: "s", Query: "SELECT 2 /* discarded */"}, &pgproto3.Sync{})
	rawRound(t, pc, fe, 1, &pgproto3.Query{String: "ROLLBACK TO a"})
	st, errs := rawRound(t, pc, fe, 1, &pgproto3.Bind{PreparedStatement: "s"}, &pgproto3.Execute{}, &pgproto3.Sync{})
	rawRound(t, pc, fe, 1, &pgproto3.Query{String: "COMMIT"})
	t.Logf("bind of span A's statement: %q %q; recorded %q", st, errs, w.Splits())
	if len(w.Splits()) == 0 {
		t.Errorf("false negative: the server ran span A's statement in a later transaction, nothing recorded")
	}
}

// pgx traffic that must record nothing: COPY in, COPY fail, COPY out,
// empty query, multi-statement query, Prepare/Deallocate in a transaction,
// Flush without Sync.
func TestSplitWatchRawNoFalsePositives(t *testing.T) {
	ctx := context.Background()
	w, proxied, _ := advSetup(t)
	conn := connect(t, ctx, proxied)
	if _, err := conn.Exec(ctx, "CREATE TABLE rv (a int, b text)"); err != nil {
		t.Fatal(err)
	}
	rows := [][]any{{1, "x"}, {2, strings.Repeat("y", 3<<20)}}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"rv"}, []string{"a", "b"}, pgx.CopyFromRows(rows))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bad := errors.New("source fails")
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"rv"}, []string{"a", "b"}, pgx.CopyFromFunc(func() ([]any, error) { return nil, bad }))
		return err
	})
	if err == nil {
		t.Fatalf("copy fail: %v", err)
	}
	var out bytes.Buffer
	if _, err := conn.PgConn().CopyTo(ctx, &out, "COPY rv TO STDOUT"); err != nil || out.Len() < 3<<20 {
		t.Fatal(err, out.Len())
	}
	if _, err := conn.PgConn().Exec(ctx, "").ReadAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PgConn().Exec(ctx, "BEGIN; SELECT 1").ReadAll(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT 4").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Prepare(ctx, "p", "SELECT 5"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "p").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := conn.Deallocate(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// Error in the middle of a group, outside a transaction.
	b := &pgx.Batch{}
	b.Queue("SELECT 1/0")
	b.Queue("SELECT 6")
	if err := conn.SendBatch(ctx, b).Close(); err == nil {
		t.Fatal("want division by zero")
	}
	big := strings.Repeat("z", 5<<20)
	var back string
	if err := conn.QueryRow(ctx, "SELECT $1::text", big).Scan(&back); err != nil || back != big {
		t.Fatal(err, len(back))
	}
	pc := conn.PgConn()
	fe := pc.Frontend()
	fe.Send(&pgproto3.Parse{Query: "SELECT 7"})
	fe.Send(&pgproto3.Describe{ObjectType: 'S'})
	fe.Send(&pgproto3.Flush{})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // ParseComplete, ParameterDescription, RowDescription
		if _, err := fe.Receive(); err != nil {
			t.Fatal(err)
		}
	}
	st, errs := rawRound(t, pc, fe, 1, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Close{ObjectType: 'S'}, &pgproto3.Sync{})
	if st != "I" || len(errs) > 0 {
		t.Fatal(st, errs)
	}
	if s := w.Splits(); len(s) != 0 {
		t.Errorf("recorded %q, want none", s)
	}
	t.Logf("%d groups judged", w.Groups())
}

// A client writing one byte at a time.
func TestSplitWatchRawOneByte(t *testing.T) {
	w, proxied, _ := advSetup(t)
	cfg, err := pgconn.ParseConfig(proxied)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", w.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	msgs := append(request(80877103), startup(cfg.User, cfg.Database)...)
	var q []byte
	for _, m := range []pgproto3.FrontendMessage{
		&pgproto3.Parse{Query: "SELECT 1"}, &pgproto3.Bind{}, &pgproto3.Execute{}, &pgproto3.Sync{},
		&pgproto3.Query{String: ""}, &pgproto3.Query{String: "SELECT 2; SELECT 3"},
	} {
		q, _ = m.Encode(q)
	}
	got := make(chan error, 1)
	go func() {
		var all []byte
		b := make([]byte, 4096)
		for {
			n, err := c.Read(b)
			all = append(all, b[:n]...)
			if bytes.Count(all, []byte{'Z', 0, 0, 0, 5}) == 4 {
				got <- nil
				return
			}
			if err != nil {
				got <- fmt.Errorf("%v after %q", err, all)
				return
			}
		}
	}()
	one := func(b []byte) {
		for i := range b {
			if _, err := c.Write(b[i : i+1]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	one(msgs[:8])
	time.Sleep(100 * time.Millisecond) // the 'N'
	one(msgs[8:])
	time.Sleep(200 * time.Millisecond)
	one(q)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestSplitWatchRawConcurrentAndClose(t *testing.T) {
	var w *SplitWatch
	var addr string
	t.Run("inner", func(t *testing.T) {
		ctx := context.Background()
		var proxied string
		w, proxied, _ = advSetup(t)
		addr = w.ln.Addr().String()
		var wg sync.WaitGroup
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := pgx.Connect(ctx, proxied)
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close(ctx)
				for j := 0; j < 20; j++ {
					var n int
					if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
						return tx.QueryRow(ctx, "SELECT $1::int", pgx.QueryExecModeDescribeExec, j).Scan(&n)
					}); err != nil || n != j {
						t.Error(err, n)
						return
					}
				}
			}()
		}
		wg.Wait()
		// Leave a connection open, blocked in a query, and a half-sent message.
		pc, _ := rawConn(t, proxied)
		go pc.Exec(ctx, "SELECT pg_sleep(30)").ReadAll()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0, 0, 0})
		time.Sleep(100 * time.Millisecond)
		if s := w.Splits(); len(s) != 0 {
			t.Errorf("recorded %q", s)
		}
	})
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("connection accepted after close")
	}
}
