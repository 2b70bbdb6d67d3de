// Package typescript_test runs the TypeScript client's tests
// (clients/typescript/test, node --test) against a real `readpast serve`
// on SQLite that it builds and starts, after installing the package's
// pinned development dependencies and building it when they are missing
// or stale (testbin.TypeScript, which other test packages share).
package typescript_test

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	readpastBin.Remove()
	os.Exit(code)
}

// readpastBin is the readpast command the tests serve, built once and
// removed by TestMain.
var readpastBin testbin.Readpast

// tsPkg is this package, installed and built once per test process.
var tsPkg testbin.TypeScript

// TestTypeScriptClient builds the package and runs `npm test` in this
// folder with READPAST_URL, READPAST_TOKEN and READPAST_READ_TOKEN naming a
// fresh server, and fails with the node output when any node test fails or
// is skipped, or when none ran. Without node or npm it is skipped, or
// fails under CI=true.
func TestTypeScriptClient(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the package's dependencies, starts a server and runs the TypeScript client's tests")
	}
	// The package builds while the server starts.
	built := make(chan struct{})
	go func() {
		defer close(built)
		tsPkg.Prepare()
	}()
	readToken := testbin.Token(t)
	srv := readpastBin.Serve(t, testbin.ServeOptions{Env: []string{"READPAST_READ_TOKENS=" + readToken}})
	<-built
	tsPkg.Build(t) // its failure or skip
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	outb, err := tsPkg.Npm(ctx, []string{"test"},
		"READPAST_URL="+srv.URL,
		"READPAST_TOKEN="+srv.Token,
		"READPAST_READ_TOKEN="+readToken,
	).CombinedOutput()
	out := string(outb)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("npm test: %v after %s\n%s", err, took.Round(time.Millisecond), out)
	}
	s, ok := summary(out)
	if !ok {
		t.Fatalf("npm test did not print node's test summary\n%s", out)
	}
	if testing.Verbose() {
		t.Logf("node tests:\n%s", out)
	}
	if s.fail > 0 || s.cancelled > 0 || s.skipped > 0 || s.todo > 0 || s.pass != s.tests || s.tests == 0 {
		t.Fatalf("node tests: %d run, %d passed, %d failed, %d cancelled, %d skipped, %d todo: every one must pass\n%s",
			s.tests, s.pass, s.fail, s.cancelled, s.skipped, s.todo, out)
	}
	t.Logf("%d node tests passed in %s", s.pass, took.Round(time.Millisecond))
}

// counts is node's closing TAP summary.
type counts struct {
	tests, pass, fail, cancelled, skipped, todo int
}

var summaryLine = regexp.MustCompile(`(?m)^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$`)

// summary reads the "# tests N" ... "# todo N" lines node's TAP reporter
// ends with; ok is false unless all six are there.
func summary(out string) (c counts, ok bool) {
	seen := map[string]bool{}
	for _, m := range summaryLine.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		seen[m[1]] = true
		switch m[1] {
		case "tests":
			c.tests = n
		case "pass":
			c.pass = n
		case "fail":
			c.fail = n
		case "cancelled":
			c.cancelled = n
		case "skipped":
			c.skipped = n
		case "todo":
			c.todo = n
		}
	}
	return c, len(seen) == 6
}

func TestSummary(t *testing.T) {
	for _, c := range []struct {
		out  string
		want counts
		ok   bool
	}{
		{"ok 1 - x\n# tests 12\n# suites 3\n# pass 12\n# fail 0\n# cancelled 0\n# skipped 0\n# todo 0\n# duration_ms 1\n",
			counts{tests: 12, pass: 12}, true},
		{"# tests 3\n# pass 1\n# fail 1\n# cancelled 0\n# skipped 1\n# todo 0\n", counts{tests: 3, pass: 1, fail: 1, skipped: 1}, true},
		{"# tests 3\n# pass 3\n", counts{tests: 3, pass: 3}, false},
		{"SyntaxError: ...\n", counts{}, false},
	} {
		got, ok := summary(c.out)
		if got != c.want || ok != c.ok {
			t.Errorf("summary(%q) = %+v, %v, want %+v, %v", c.out, got, ok, c.want, c.ok)
		}
	}
}
