// Package migrate reads a store's embedded schema migrations: one SQL file
// per schema version, named NNNN_description.sql (0001_init.sql,
// 0002_…), versions 1, 2, 3 and so on with none missing. Both stores apply
// them in order, each recording the versions it applied.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
)

// Migration is one schema version.
type Migration struct {
	// Version is the number the file name starts with.
	Version int
	// Name is the file name, kept in the schema table for people.
	Name string
	// SQL is the file's text.
	SQL string
}

// fileName is NNNN_description.sql.
var fileName = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.sql$`)

// Load reads the migrations in dir of fsys, in version order. Every file
// must be named NNNN_description.sql, and the versions must run from 1
// without a gap or a repeat.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("migrations: %q is not named NNNN_description.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations: %q is version %d, want %d: versions run from 1 with no gap or repeat", m.Name, m.Version, i+1)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migrations: none in %s", dir)
	}
	return ms, nil
}

// Latest is the highest version of ms (0 for none).
func Latest(ms []Migration) int {
	if len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}
