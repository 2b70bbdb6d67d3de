// Package stores opens a readpast.Store from a database URL, so commands
// and servers can take one -database flag for every engine.
package stores

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	kind, target, err := Parse(url)
	if err != nil {
		return nil, err
	}
	switch kind {
	case KindPostgres:
		s, err := postgres.Open(ctx, target)
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		return s, nil
	default:
		s, err := sqlite.Open(ctx, target, sqlite.Options{Logger: log})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
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
