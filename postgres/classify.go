package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
)

// IsUnavailable reports whether err means the database could not be
// reached, or answered that it cannot serve now: a failed or lost
// connection, a timeout, a server shutting down or starting up, or out of
// connections or resources. Trying again later may work. Errors about the
// request itself (bad SQL, a constraint, a wrong password, a database that
// does not exist) are not.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, readpast.ErrUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return unavailableSQLState(pgErr.Code)
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connErr) || errors.As(err, &netErr) ||
		pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed)
}

// unavailableSQLState reports whether a server error code means "not now":
// class 08 (connection exception), 53 (insufficient resources: too many
// connections, disk full, out of memory), 57P01-57P05 (admin or crash
// shutdown, cannot connect now, idle session timeout) and 57014 (query
// cancelled, as statement_timeout does).
func unavailableSQLState(code string) bool {
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") ||
		strings.HasPrefix(code, "57P") || code == "57014"
}

// classify wraps err with readpast.ErrUnavailable when IsUnavailable(err),
// so callers can branch on it with errors.Is; other errors are returned as
// they are.
func classify(err error) error {
	if err == nil || errors.Is(err, readpast.ErrUnavailable) || !IsUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", readpast.ErrUnavailable, err)
}

// opErr names the operation that failed with err, marking err with
// readpast.ErrUnavailable when it is (classify).
func opErr(op string, err error) error {
	return fmt.Errorf("%s: %w", op, classify(err))
}

// IsUnavailable is the package's IsUnavailable, as a method so that code
// holding a readpast.Store (the HTTP API) can ask without importing this
// package.
func (s *Store) IsUnavailable(err error) bool { return IsUnavailable(err) }
