package pgtest

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func advSetup(t *testing.T) (w *SplitWatch, proxied, host string) {
	u, err := url.Parse(URL(t))
	if err != nil {
		t.Fatal(err)
	}
	w = WatchSplits(t, u.Host)
	proxied, err = w.URL(withExec(t, u.String()))
	if err != nil {
		t.Fatal(err)
	}
	return w, proxied, u.Host
}

// TestSplitWatchNamedStatement: a named statement prepared in one
// transaction and bound in a later round trip, next to a fresh Parse in
// the same group or in another transaction, is recorded each time, under
// its text.
func TestSplitWatchNamedStatement(t *testing.T) {
	ctx := context.Background()
	w, proxied, _ := advSetup(t)
	conn := connect(t, ctx, proxied)
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Prepare(ctx, "named", "SELECT 1 /* named */")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if s := w.Splits(); len(s) != 0 {
		t.Fatalf("after Prepare in a transaction: %q, want none", s)
	}
	b := &pgx.Batch{}
	b.Queue("named")
	b.Queue("SELECT 2 /* fresh */")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if s := w.Splits(); len(s) != 1 || s[0] != "SELECT 1 /* named */" {
		t.Fatalf("after a batch binding it outside a transaction: %q, want the named statement", s)
	}
	var n int
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "named").Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if s := w.Splits(); len(s) != 2 {
		t.Fatalf("after binding it in a second transaction: %q, want it recorded again", s)
	}
}

// TestSplitWatchPipeline: pipelined groups are judged by the status the
// server will be in when it reaches them, not the last one received.
func TestSplitWatchPipeline(t *testing.T) {
	ctx := context.Background()
	w, proxied, _ := advSetup(t)
	conn := connect(t, ctx, proxied)
	pc := conn.PgConn()
	run := func(first string) {
		p := pc.StartPipeline(ctx)
		p.SendQueryParams(first, nil, nil, nil, nil)
		p.SendPipelineSync()
		p.SendPrepare("", "SELECT 3 /* split after "+first+" */", nil)
		p.SendPipelineSync()
		p.SendQueryPrepared("", nil, nil, nil)
		p.SendPipelineSync()
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 8; i++ {
			r, err := p.GetResults()
			if err != nil {
				t.Fatal(err)
			}
			if rr, ok := r.(*pgconn.ResultReader); ok {
				rr.Close()
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pc.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		t.Fatal(err)
	}
	run("COMMIT") // the split runs outside a transaction
	got := w.Splits()
	t.Logf("COMMIT; Parse; Bind pipelined: %q", got)
	if len(got) == 0 {
		t.Errorf("false negative: split after a pipelined COMMIT not recorded")
	}
	n := len(got)
	run("BEGIN") // the split runs inside a transaction
	got = w.Splits()[n:]
	t.Logf("BEGIN; Parse; Bind pipelined: %q", got)
	if len(got) != 0 {
		t.Errorf("false positive: split after a pipelined BEGIN recorded")
	}
	if _, err := pc.Exec(ctx, "COMMIT").ReadAll(); err != nil {
		t.Fatal(err)
	}
}

func startup(user, db string) []byte {
	body := []byte{0, 3, 0, 0}
	for _, s := range []string{"user", user, "database", db} {
		body = append(append(body, s...), 0)
	}
	body = append(body, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body)+4)), body...)
}

func request(code uint32, extra ...uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+4*len(extra)))
	b = binary.BigEndian.AppendUint32(b, code)
	for _, e := range extra {
		b = binary.BigEndian.AppendUint32(b, e)
	}
	return b
}

// TestSplitWatchStartup: an encryption request passes through; refused,
// the startup that follows is watched as usual; accepted, the connection
// is recorded as unwatched.
func TestSplitWatchStartup(t *testing.T) {
	w, proxied, _ := advSetup(t)
	cfg, err := pgconn.ParseConfig(proxied)
	if err != nil {
		t.Fatal(err)
	}
	addr := w.ln.Addr().String()
	for _, code := range []uint32{80877103, 80877104} { // SSLRequest, GSSENCRequest
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		before := len(w.Splits())
		if _, err := c.Write(request(code)); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatalf("request %d: %v", code, err)
		}
		if b[0] != 'N' {
			c.Close()
			deadline := time.Now().Add(3 * time.Second)
			for len(w.Splits()) == before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if len(w.Splits()) == before {
				t.Errorf("request %d accepted (%q): the unwatched connection was not recorded", code, b)
			}
			continue
		}
		if _, err := c.Write(startup(cfg.User, cfg.Database)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil || b[0] != 'R' {
			t.Errorf("request %d refused, then the startup got %q: %v", code, b, err)
		}
		c.Close()
	}
}
