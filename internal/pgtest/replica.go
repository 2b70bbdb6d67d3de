package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// StartStandby makes a streaming replica of s: a pg_basebackup of the
// running server into a new temporary directory, set up to follow s (with
// standby.signal) under application_name name, and started with opts on
// 127.0.0.1 and a free port. It returns once the standby accepts
// read-only connections. To make it synchronous, set
// synchronous_standby_names = name on s (ALTER SYSTEM, then
// pg_reload_conf()). Promote turns it into a primary; Stop removes it.
func (s *Server) StartStandby(ctx context.Context, name string, opts Options) (*Server, error) {
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", s.port, name)
	return start(ctx, opts, func(st *Server) error {
		cmd := st.command(ctx, filepath.Join(st.bindir, "pg_basebackup"),
			"-D", st.dataDir, "-d", conninfo, "-X", "stream", "-c", "fast", "-R", "--no-sync")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("pgtest: pg_basebackup: %w\n%s", err, tail(out.Bytes()))
		}
		// -R wrote a primary_conninfo; a later line wins, and this one
		// carries the standby's name for synchronous_standby_names.
		f, err := os.OpenFile(filepath.Join(st.dataDir, "postgresql.auto.conf"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		_, err = fmt.Fprintf(f, "primary_conninfo = '%s'\n", conninfo)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		return nil
	})
}

// Promote ends recovery on a standby: it becomes a primary that accepts
// writes. It returns once the promotion is done.
func (s *Server) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: promote: %w", err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&ok); err != nil {
		return fmt.Errorf("pgtest: promote: %w", err)
	}
	if !ok {
		return fmt.Errorf("pgtest: promote: the standby on port %d did not finish promoting within 60 s", s.port)
	}
	s.logf("pgtest: promoted the standby on port %d", s.port)
	return nil
}

// Exec runs sql on database postgres of s.
func (s *Server) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgtest: %s: %w", sql, err)
	}
	return nil
}

// MultiHostURL returns a URL for database dbname that lists every server
// of servers as a host, for a client that follows the primary
// (target_session_attrs=read-write) across a failover.
func MultiHostURL(dbname string, servers ...*Server) string {
	var hosts bytes.Buffer
	for i, s := range servers {
		if i > 0 {
			hosts.WriteByte(',')
		}
		hosts.WriteString("127.0.0.1:" + strconv.Itoa(s.port))
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write", hosts.String(), dbname)
}
