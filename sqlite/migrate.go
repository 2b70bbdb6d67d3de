package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// loadMigrations reads the embedded migrations (internal/migrate).
func loadMigrations() ([]migrate.Migration, error) {
	ms, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return ms, nil
}

var _ readpast.SchemaVersioner = (*Store)(nil)

// Migrate brings the schema up to date in one write transaction. It returns
// an error wrapping readpast.ErrSchemaTooNew, and changes nothing, when the
// database was migrated by a newer readpast. Concurrent Migrate calls from
// several processes are safe: they serialize on the write lock.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	latest := migrate.Latest(ms)

	// Check first with a read, so a newer database is never write-locked.
	var current int
	if err := s.retry(ctx, "read schema version", func() error {
		var err error
		current, err = schemaVersion(ctx, s.write)
		return err
	}); err != nil {
		return err
	}
	if current > latest {
		return fmt.Errorf("sqlite: %q has schema version %d, this readpast knows up to %d: %w",
			s.path, current, latest, readpast.ErrSchemaTooNew)
	}
	if current == latest {
		return nil
	}

	return s.writeTx(ctx, "migrate", func(tx *sql.Tx) error {
		current, err := schemaVersion(ctx, tx)
		if err != nil {
			return err
		}
		if current > latest {
			return fmt.Errorf("%q has schema version %d, this readpast knows up to %d: %w",
				s.path, current, latest, readpast.ErrSchemaTooNew)
		}
		if _, err := tx.ExecContext(ctx, createVersionTableSQL); err != nil {
			return err
		}
		for _, m := range ms[current:] {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, insertVersionSQL, m.Version, micros(s.now())); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// SchemaVersion reports the database's schema version (0 before the first
// migration, when the version table does not exist yet) and the latest
// version this code knows. It only reads: it works on a store opened with
// SkipMigrate, and on a database migrated by a newer readpast (current is
// then greater than latest).
func (s *Store) SchemaVersion(ctx context.Context) (current, latest int, err error) {
	ms, err := loadMigrations()
	if err != nil {
		return 0, 0, err
	}
	latest = migrate.Latest(ms)
	if err := s.readOp(ctx, "read schema version", func(db *sql.DB) error {
		var err error
		current, err = schemaVersion(ctx, db)
		return err
	}); err != nil {
		return 0, latest, err
	}
	return current, latest, nil
}

// querier is what schemaVersion needs from a *sql.DB or *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaVersion returns the highest applied migration, 0 for a new database.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, versionTableExistsSQL).Scan(&n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, currentVersionSQL).Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}

// Schema version bookkeeping. The table is created by Migrate itself, not
// by a migration, so every version of readpast can read it.
const (
	versionTableExistsSQL = `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'readpast_schema_migrations'`
	currentVersionSQL     = `SELECT max(version) FROM readpast_schema_migrations`
	createVersionTableSQL = `CREATE TABLE IF NOT EXISTS readpast_schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL
)`
	insertVersionSQL = `INSERT INTO readpast_schema_migrations (version, applied_at) VALUES (?, ?)`
)
