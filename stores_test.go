package readpast_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// eachStore runs test on a fresh PostgreSQL store and a fresh SQLite
// store, as subtests named for them.
func eachStore(t *testing.T, test func(t *testing.T, s readpast.Store)) {
	t.Run("postgres", func(t *testing.T) { test(t, newPGStore(t)) })
	t.Run("sqlite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "readpast.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		test(t, s)
	})
}

// startChild starts this test binary again running only the test named
// run, with env added to the environment, and returns the process. The
// caller waits for it (or kills it).
func startChild(t *testing.T, run string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// killChildren kills and reaps the processes of cmds still running.
func killChildren(cmds []*exec.Cmd) {
	for _, c := range cmds {
		if c.ProcessState == nil {
			c.Process.Kill()
			c.Wait()
		}
	}
}

// childRecorder is for the body of a child test process: it returns a
// context that ends at SIGTERM and a function that appends one line to
// the file out, in one write, so that lines stay whole if the process is
// killed.
func childRecorder(t *testing.T, out string) (context.Context, func(format string, args ...any)) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	t.Cleanup(stop)
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var mu sync.Mutex
	return ctx, func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprintf(f, format+"\n", args...); err != nil {
			panic(err)
		}
	}
}

// runClientUntil runs a client on s with cfg until ctx ends, then stops
// it.
func runClientUntil(ctx context.Context, t *testing.T, s readpast.Store, cfg readpast.Config) {
	c, err := readpast.NewClient(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Stop(sctx)
}
