package readpast_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines is the most lines a production file may have: a file longer
// than that holds more than one thing, and is split by what it holds.
const maxLines = 600

// TestProductionFilesStayShort: every source file of the product (Go,
// SQL, the Python and TypeScript clients, the dashboard's scripts,
// styles and templates) has fewer than maxLines lines. Tests, generated
// files, data and documentation are not counted.
func TestProductionFilesStayShort(t *testing.T) {
	skipDirs := map[string]bool{
		".git": true, "node_modules": true, "dist": true, "build": true, "generated": true,
		"testdata": true, "test": true, "tests": true, ".npm-cache": true, "__pycache__": true,
	}
	kinds := map[string]bool{
		".go": true, ".sql": true, ".py": true, ".ts": true, ".js": true, ".mjs": true,
		".css": true, ".html": true,
	}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if !kinds[filepath.Ext(name)] || strings.HasSuffix(name, "_test.go") ||
			strings.HasSuffix(name, ".test.ts") || strings.HasSuffix(name, ".d.ts") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		if n := bytes.Count(b, []byte("\n")); n >= maxLines {
			t.Errorf("%s has %d lines, want fewer than %d: split it by what it holds", filepath.ToSlash(path), n, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the walk missed the sources", checked)
	}
}
