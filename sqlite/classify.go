package sqlite

import (
	"context"
	"errors"
	"fmt"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/readpast/readpast"
)

// IsUnavailable reports whether err means the database file cannot be used
// now: it cannot be opened (SQLITE_CANTOPEN), is read-only
// (SQLITE_READONLY), the disk is full or failing (SQLITE_FULL,
// SQLITE_IOERR, SQLITE_NOMEM), it stayed locked past the store's lock
// timeout (SQLITE_BUSY, SQLITE_LOCKED, SQLITE_PROTOCOL), or the operation
// timed out. Trying again later may work. Errors about the request itself
// or a damaged file (SQLITE_CORRUPT, SQLITE_NOTADB) are not.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, readpast.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR,
		sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL:
		return true
	}
	return false
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

// IsUnavailable is the package's IsUnavailable, as a method so that code
// holding a readpast.Store (the HTTP API) can ask without importing this
// package.
func (s *Store) IsUnavailable(err error) bool { return IsUnavailable(err) }
