package migrate

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	ok := fstest.MapFS{
		"m/0002_more.sql": file("two"),
		"m/0001_init.sql": file("one"),
	}
	ms, err := Load(ok, "m")
	if err != nil || len(ms) != 2 || ms[0].SQL != "one" || ms[1].Name != "0002_more.sql" || Latest(ms) != 2 {
		t.Fatalf("Load: %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"m/0001_a.sql": file(""), "m/0003_c.sql": file("")},
		"repeat":    {"m/0001_a.sql": file(""), "m/0001_b.sql": file("")},
		"from 2":    {"m/0002_a.sql": file("")},
		"3 digits":  {"m/001_a.sql": file("")},
		"not sql":   {"m/0001_a.txt": file("")},
		"no prefix": {"m/init.sql": file("")},
		"empty":     {"m/.keep": file("")},
	} {
		if _, err := Load(fsys, "m"); err == nil || !strings.HasPrefix(err.Error(), "migrations: ") {
			t.Errorf("%s: Load = %v, want an error", name, err)
		}
	}
}
