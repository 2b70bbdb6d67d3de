package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
)

func TestIsUnavailable(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{&pgconn.PgError{Code: "57P01"}, true}, // admin_shutdown
		{&pgconn.PgError{Code: "57P02"}, true}, // crash_shutdown
		{&pgconn.PgError{Code: "57P03"}, true}, // cannot_connect_now
		{&pgconn.PgError{Code: "08006"}, true}, // connection_failure
		{&pgconn.PgError{Code: "53300"}, true}, // too_many_connections
		{&pgconn.PgError{Code: "57014"}, true}, // statement timeout
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "28P01"}, false}, // wrong password
		{&pgconn.PgError{Code: "3D000"}, false}, // no such database
		{&pgconn.PgError{Code: "42P01"}, false}, // no such table
		{fmt.Errorf("claim: %w", &pgconn.PgError{Code: "57P01"}), true},
		{opErr, true},
		{&pgconn.ConnectError{}, true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{pgconn.ErrConnClosed, true},
		{readpast.ErrUnavailable, true},
		{readpast.ErrNotFound, false},
	} {
		if got := IsUnavailable(tc.err); got != tc.want {
			t.Errorf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if c := classify(tc.err); errors.Is(c, readpast.ErrUnavailable) != tc.want || (tc.err != nil && !errors.Is(c, tc.err)) {
			t.Errorf("classify(%v) = %v", tc.err, c)
		}
	}
}

// TestOpenUnreachable: Open fails with ErrUnavailable on a refused
// connection, and within the connect timeout on a host that accepts
// connections and never answers (it used to hang for as long as the
// caller's context allowed). A database that does not exist is not
// "unavailable": it will not come back by waiting.
func TestOpenUnreachable(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = Open(context.Background(), "postgres://u@"+addr+"/db")
		if !errors.Is(err, readpast.ErrUnavailable) {
			t.Errorf("Open on a closed port = %v, want ErrUnavailable", err)
		}
	})
	t.Run("silent", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() { // accept and hold connections, never answering
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				held = append(held, c)
			}
		}()
		start := time.Now()
		_, err = Open(context.Background(), "postgres://u@"+ln.Addr().String()+"/db")
		took := time.Since(start)
		if !errors.Is(err, readpast.ErrUnavailable) {
			t.Errorf("Open on a silent port = %v, want ErrUnavailable", err)
		}
		if took > DefaultConnectTimeout+5*time.Second {
			t.Errorf("Open on a silent port took %v", took)
		}
	})
	t.Run("no such database", func(t *testing.T) {
		t.Parallel()
		url := pgtest.URL(t)
		i := strings.LastIndex(url, "/")
		q := ""
		if j := strings.Index(url[i:], "?"); j >= 0 {
			q = url[i+j:]
		}
		_, err := Open(context.Background(), url[:i]+"/readpast_no_such_db"+q)
		if err == nil || errors.Is(err, readpast.ErrUnavailable) {
			t.Errorf("Open of a missing database = %v, want an error that is not ErrUnavailable", err)
		}
	})
}
