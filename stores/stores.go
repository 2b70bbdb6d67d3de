// Package stores opens a readpast.Store from a database URL, so commands
// and servers can take one -database flag for every engine.
package stores

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// DefaultSQLiteFile is the database Open uses for an empty URL: a SQLite
// file in the working directory.
const DefaultSQLiteFile = "readpast.db"

// schemeRE matches a URL scheme followed by "://".
var schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// Open opens the store that url names:
//
//	""                                   SQLite file readpast.db in the working directory
//	postgres://... or postgresql://...   PostgreSQL (package postgres)
//	sqlite:PATH, sqlite://PATH           SQLite file PATH (sqlite:///abs/path for an absolute one)
//	file:PATH, file://PATH               SQLite file PATH
//	PATH                                 SQLite file PATH
//
// Any other scheme is an error. A SQLite store is migrated as it opens
// (it is the zero-configuration default); a PostgreSQL store is not: call
// Migrate, which is harmless on an up-to-date database of either kind.
// log receives the SQLite store's warnings; nil discards them.
func Open(ctx context.Context, url string, log *slog.Logger) (readpast.Store, error) {
	return OpenWith(ctx, url, Options{Logger: log})
}

// Options tunes OpenWith. The zero value opens as Open does.
type Options struct {
	// Logger receives the SQLite store's warnings; nil discards them.
	Logger *slog.Logger
	// SkipMigrate opens a SQLite database (creating it when missing)
	// without migrating it; a PostgreSQL store is never migrated by Open.
	SkipMigrate bool
	// Existing opens only a database that exists, and creates and migrates
	// nothing: a missing SQLite file is an error wrapping fs.ErrNotExist
	// that names it. Use CheckSchema to see whether its schema is usable.
	Existing bool
	// ReadOnly is Existing, and every write fails: SQLite opens the file
	// read-only (see sqlite.Options.ReadOnly); PostgreSQL sessions run with
	// default_transaction_read_only.
	ReadOnly bool
}

// OpenWith opens the store that url names (see Open) as opts says.
func OpenWith(ctx context.Context, url string, opts Options) (readpast.Store, error) {
	kind, target, err := Parse(url)
	if err != nil {
		return nil, err
	}
	switch kind {
	case KindPostgres:
		if opts.ReadOnly {
			target = withParam(target, "default_transaction_read_only", "on")
		}
		s, err := postgres.Open(ctx, target)
		if err != nil {
			return nil, fmt.Errorf("open postgres store %s: %w", Redact(url), err)
		}
		return s, nil
	default:
		s, err := sqlite.Open(ctx, target, sqlite.Options{
			Logger:      opts.Logger,
			MustExist:   opts.Existing,
			SkipMigrate: opts.SkipMigrate || opts.Existing,
			ReadOnly:    opts.ReadOnly,
		})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// withParam adds the query parameter key=value to a URL.
func withParam(u, key, value string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + neturl.QueryEscape(key) + "=" + neturl.QueryEscape(value)
}

// CheckSchema reports whether store's schema is the one this readpast
// uses. When it is not, the error is a *SchemaError: errors.Is(err,
// readpast.ErrSchemaTooOld) when migrations are missing (run Migrate, or
// `readpast migrate`), readpast.ErrSchemaTooNew when a newer readpast
// migrated it. A store that does not report its schema version
// (readpast.SchemaVersioner) passes.
func CheckSchema(ctx context.Context, store readpast.Store) error {
	sv, ok := store.(readpast.SchemaVersioner)
	if !ok {
		return nil
	}
	cur, latest, err := sv.SchemaVersion(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	case cur != latest:
		return &SchemaError{Current: cur, Latest: latest}
	}
	return nil
}

// SchemaError is a database schema this readpast cannot use.
type SchemaError struct {
	// Current is the database's schema version, 0 before any migration.
	Current int
	// Latest is the version this readpast uses.
	Latest int
}

// Error says which versions differ.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("schema version %d of %d", e.Current, e.Latest)
}

// Is makes errors.Is(err, readpast.ErrSchemaTooOld) true for an older
// schema and errors.Is(err, readpast.ErrSchemaTooNew) for a newer one.
func (e *SchemaError) Is(target error) bool {
	return target == readpast.ErrSchemaTooOld && e.Current < e.Latest ||
		target == readpast.ErrSchemaTooNew && e.Current > e.Latest
}

// Redact returns url as it is safe to show in logs and messages: a
// PostgreSQL URL without its password (in the user information or a
// password parameter), or the absolute path of a SQLite file. A URL that
// does not parse is shown as the engine's name only.
func Redact(url string) string {
	kind, target, err := Parse(url)
	if err != nil {
		return "(invalid database URL)"
	}
	if kind == KindSQLite {
		if abs, err := filepath.Abs(target); err == nil {
			return abs
		}
		return target
	}
	u, err := neturl.Parse(target)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if u.User != nil {
		u.User = neturl.User(u.User.Username())
	}
	if q := u.Query(); q.Has("password") {
		q.Del("password")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Kind names a storage engine.
type Kind string

// The engines Open knows.
const (
	KindSQLite   Kind = "sqlite"
	KindPostgres Kind = "postgres"
)

// Parse tells which engine url names and what to open with it: the URL
// itself for PostgreSQL, the file path for SQLite. See Open for the forms.
func Parse(url string) (Kind, string, error) {
	if url == "" {
		return KindSQLite, DefaultSQLiteFile, nil
	}
	lower := strings.ToLower(url)
	switch {
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return KindPostgres, url, nil
	case strings.HasPrefix(lower, "sqlite://"):
		return sqlitePath(url, url[len("sqlite://"):])
	case strings.HasPrefix(lower, "sqlite:"):
		return sqlitePath(url, url[len("sqlite:"):])
	case strings.HasPrefix(lower, "file://"):
		return sqlitePath(url, url[len("file://"):])
	case strings.HasPrefix(lower, "file:"):
		return sqlitePath(url, url[len("file:"):])
	}
	if m := schemeRE.FindStringSubmatch(url); m != nil {
		return "", "", fmt.Errorf("unsupported database URL scheme %q: use postgres://, sqlite:PATH or a file path", m[1])
	}
	if looksLikeKeyValueDSN(url) {
		return "", "", errors.New("database URL looks like a PostgreSQL key=value string: use a postgres:// URL")
	}
	return KindSQLite, url, nil
}

// sqlitePath checks the path part of a SQLite URL.
func sqlitePath(url, path string) (Kind, string, error) {
	if path == "" {
		return "", "", fmt.Errorf("database URL %q has no file path", url)
	}
	return KindSQLite, path, nil
}

// looksLikeKeyValueDSN spots "host=... dbname=..." strings, which are not
// file names anyone means.
func looksLikeKeyValueDSN(s string) bool {
	for _, key := range []string{"host=", "dbname=", "user=", "port="} {
		if strings.HasPrefix(s, key) || strings.Contains(s, " "+key) {
			return true
		}
	}
	return false
}
