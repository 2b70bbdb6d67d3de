package sqlite

import "github.com/readpast/readpast/internal/migrate"

// SchemaVersion is the schema version this code migrates to.
func SchemaVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		return 0
	}
	return migrate.Latest(ms)
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }
