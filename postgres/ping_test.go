package postgres

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/netfault"
	"github.com/readpast/readpast/internal/pgtest"
)

// TestIdleHalfOpenConnectionIsReplaced: a pooled connection that went
// half-open while idle (its server side gone, its client side silent)
// fails the pool's ping within DefaultPingTimeout and is replaced, so a
// call whose context has no deadline goes on, on a new connection. With
// no bound on the ping the call hangs for good. Close then waits for
// pgx's cleanup of the dead connection, which reads what is left on it
// for up to 15 s (pgconn's asyncClose) and no longer.
func TestIdleHalfOpenConnectionIsReplaced(t *testing.T) {
	t.Parallel()
	proxy, proxied, err := netfault.StartURL(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	s, err := Open(context.Background(), proxied)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.pool.Config().PingTimeout; got != DefaultPingTimeout {
		t.Errorf("PingTimeout %v, want DefaultPingTimeout", got)
	}
	// The pool pings a connection idle for more than a second before it
	// hands it out.
	time.Sleep(1500 * time.Millisecond)
	proxy.HalfOpenAll()
	done := make(chan error, 1)
	began := time.Now()
	go func() {
		_, err := s.pool.Exec(context.Background(), "SELECT 1")
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a call after the idle connection went half-open: %v", err)
		}
		t.Logf("the call went on after %v", time.Since(began).Round(time.Millisecond))
	case <-time.After(DefaultPingTimeout + 10*time.Second):
		t.Fatal("a call without a deadline hung on the half-open connection")
	}
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited for the half-open connection beyond pgx's 15 s cleanup")
	}
}

// TestPingTimeoutFromTheURL: a URL's pool_ping_timeout overrides
// DefaultPingTimeout.
func TestPingTimeoutFromTheURL(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_ping_timeout", "250ms")
	u.RawQuery = q.Encode()
	s, err := Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.pool.Config().PingTimeout; got != 250*time.Millisecond {
		t.Errorf("PingTimeout %v, want the URL's 250ms", got)
	}
}
