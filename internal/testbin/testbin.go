// Package testbin builds the readpast command for tests that run it as a
// child process: once per test process, into a directory of its own.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Readpast is the readpast binary of one test process. Its zero value is
// ready; declare one per test package and call Remove from TestMain.
type Readpast struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path builds ./cmd/readpast on first use and returns the binary's path;
// a failed build fails t (and every later caller).
func (b *Readpast) Path(t testing.TB) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "readpast-test-bin-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "readpast")
		out, err := exec.Command("go", "build", "-o", b.path, "github.com/readpast/readpast/cmd/readpast").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build ./cmd/readpast: %w\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Remove deletes the binary's directory, if Path made one.
func (b *Readpast) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}
