// Package python_test runs the Python client's tests (clients/python/tests,
// unittest) against a real `readpast serve` on SQLite that it builds and
// starts.
package python_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
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

// TestPythonClient runs `python3 -m unittest discover -s tests -v` in this
// folder with READPAST_URL and READPAST_TOKEN naming a fresh server, and
// fails with the Python output when any Python test fails (or, under
// CI=true, is skipped). Without python3 it is skipped, or fails under
// CI=true.
func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and runs the Python client's tests")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		if pgtest.InCI() {
			t.Fatal("python3 not found: under CI=true the Python client's tests cannot be skipped")
		}
		t.Skip("python3 not found: skipping the Python client's tests")
	}
	srv := readpastBin.Serve(t, testbin.ServeOptions{})
	token := srv.Token

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Env = append(testbin.Environ(),
		"READPAST_URL="+srv.URL,
		"READPAST_TOKEN="+token,
		"PYTHONDONTWRITEBYTECODE=1", // no __pycache__ in the source tree
		"PYTHONUNBUFFERED=1",
	)
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("python3 -m unittest discover -s tests: %v after %s\n%s", err, took.Round(time.Millisecond), out)
	}
	ran, skipped, ok := summary(string(out))
	if !ok || ran == 0 {
		t.Fatalf("the Python tests did not say they passed (ran %d)\n%s", ran, out)
	}
	if testing.Verbose() {
		t.Logf("Python tests:\n%s", out)
	}
	t.Logf("%d Python tests passed in %s, %d skipped", ran-skipped, took.Round(time.Millisecond), skipped)
	if skipped > 0 {
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "skipped") {
				lines = append(lines, l)
			}
		}
		if pgtest.InCI() {
			t.Fatalf("under CI=true no Python test may be skipped:\n%s", strings.Join(lines, "\n"))
		}
		t.Logf("skipped:\n%s", strings.Join(lines, "\n"))
	}
}

var (
	ranLine = regexp.MustCompile(`(?m)^Ran (\d+) tests? in `)
	okLine  = regexp.MustCompile(`(?m)^OK(?: \(skipped=(\d+)\))?$`)
)

// summary reads unittest's closing lines: how many tests ran, how many
// were skipped, and whether it said OK.
func summary(out string) (ran, skipped int, ok bool) {
	if m := ranLine.FindStringSubmatch(out); m != nil {
		ran, _ = strconv.Atoi(m[1])
	}
	m := okLine.FindStringSubmatch(out)
	if m == nil {
		return ran, 0, false
	}
	if m[1] != "" {
		skipped, _ = strconv.Atoi(m[1])
	}
	return ran, skipped, true
}

func TestSummary(t *testing.T) {
	for _, c := range []struct {
		out          string
		ran, skipped int
		ok           bool
	}{
		{"...\nRan 12 tests in 3.2s\n\nOK\n", 12, 0, true},
		{"Ran 1 test in 0.1s\n\nOK (skipped=1)\n", 1, 1, true},
		{"Ran 3 tests in 1.0s\n\nFAILED (failures=1)\n", 3, 0, false},
		{"Traceback ...\n", 0, 0, false},
	} {
		ran, skipped, ok := summary(c.out)
		if ran != c.ran || skipped != c.skipped || ok != c.ok {
			t.Errorf("summary(%q) = %d, %d, %v, want %d, %d, %v", c.out, ran, skipped, ok, c.ran, c.skipped, c.ok)
		}
	}
}
