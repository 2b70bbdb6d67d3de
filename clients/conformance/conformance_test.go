// Package conformance_test runs the client conformance scenarios
// (scenarios/*.json) through every client's driver (drivers/) against a
// fresh `readpast serve` on each store, and compares each step's outcome
// with the scenario's expectation. See README.md.
package conformance_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/testbin"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	readpastBin.Remove()
	goDriverBin.remove()
	os.Exit(code)
}

// readpastBin is the readpast command the tests serve, built once and
// removed by TestMain.
var readpastBin testbin.Readpast

// tsPkg is the TypeScript client the typescript driver imports, installed
// and built once per test process (and by one test process at a time).
var tsPkg testbin.TypeScript

// goDriverBin is the Go driver, built once and removed by TestMain.
var goDriverBin builtDriver

// builtDriver is a Go program built once per test process.
type builtDriver struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func (b *builtDriver) build(t *testing.T, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "readpast-conformance-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "driver")
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func (b *builtDriver) remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// driver is one client's conformance driver: how to start it.
type driver struct {
	name string
	// command returns the driver's command line and the environment it
	// needs besides READPAST_URL and READPAST_TOKEN. It skips t when the
	// driver cannot run here (failing instead under CI=true).
	command func(t *testing.T) (argv, env []string)
}

// drivers lists the clients under test. A new client adds its driver
// file under drivers/ and one entry here.
var drivers = []driver{
	{name: "go", command: func(t *testing.T) ([]string, []string) {
		return []string{goDriverBin.build(t, "github.com/readpast/readpast/clients/conformance/drivers/go")}, nil
	}},
	{name: "python", command: func(t *testing.T) ([]string, []string) {
		python := pythonPath(t)
		src, err := filepath.Abs(filepath.Join("..", "python", "src"))
		if err != nil {
			t.Fatal(err)
		}
		return []string{python, filepath.Join("drivers", "python", "driver.py")},
			[]string{"PYTHONPATH=" + src, "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}
	}},
	{name: "typescript", command: func(t *testing.T) ([]string, []string) {
		script := filepath.Join("drivers", "typescript", "driver.mjs")
		if !exists(script) {
			t.Fatalf("no TypeScript driver %s", script)
		}
		tsPkg.Build(t) // installs and builds clients/typescript when stale
		return []string{tool(t, "node"), script}, nil
	}},
}

// tool finds a program on PATH: a skip without it, a failure under
// CI=true.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if pgtest.InCI() {
			t.Fatalf("%s not found: under CI=true the conformance suite cannot skip it", name)
		}
		t.Skipf("%s not found: skipping its driver", name)
	}
	return p
}

// pythonPath is the interpreter python3 on PATH runs: a version manager's
// shim (pyenv) costs every driver process a shell script's start.
func pythonPath(t *testing.T) string {
	t.Helper()
	shim := tool(t, "python3")
	out, err := exec.Command(shim, "-c", "import sys; print(sys.executable)").Output()
	if p := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(p) && exists(p) {
		return p
	}
	return shim
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// store is a database `readpast serve` runs on.
type store struct {
	name string
	// url returns the database URL of a fresh database ("" for a SQLite
	// file in the test's temporary folder).
	url func(t *testing.T) string
}

var stores = []store{
	{name: "sqlite", url: func(*testing.T) string { return "" }},
	{name: "postgres", url: func(t *testing.T) string { return pgtest.URL(t) }},
}

// phases runs the scenarios of every store and driver in two phases: the
// ordinary ones side by side (at most maxRunning at once), then, once
// every combination has finished those, the exclusive ones one at a time,
// alone on the machine as far as this test goes.
type phases struct {
	slots     chan struct{}
	mu        sync.Mutex // held by the exclusive scenario running
	remaining sync.WaitGroup
}

// maxRunning bounds the scenarios running at once, across stores and
// drivers: they mostly wait (on leases, long polls, workers' shutdowns),
// so this is well above the machine's cores.
const maxRunning = 16

// TestConformance runs every scenario through every driver on every
// store: a fresh server per store and driver, a driver process per
// scenario, all scenarios at once (each on queues and keys of its own,
// named after ${run}). A scenario that fails or is skipped fails the test.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers and driver processes")
	}
	scenarios := loadScenarios(t)
	ph := &phases{slots: make(chan struct{}, maxRunning)}
	ph.remaining.Add(len(stores) * len(drivers))
	start := time.Now()
	var wg sync.WaitGroup
	for _, st := range stores {
		for _, d := range drivers {
			wg.Add(1)
			// t.Run from goroutines: the combinations run at once, whatever
			// -parallel says (their scenarios mostly wait).
			go func() {
				defer wg.Done()
				var once sync.Once
				regularDone := func() { once.Do(ph.remaining.Done) }
				// Left out by -run, t.Run returns at once: done too.
				defer regularDone()
				t.Run(st.name+"/"+d.name, func(t *testing.T) {
					defer regularDone() // skipped or failed early: not waited for
					argv, env := d.command(t)
					srv := readpastBin.Serve(t, testbin.ServeOptions{DatabaseURL: st.url(t)})
					env = append(append(testbin.Environ(), env...),
						"READPAST_URL="+srv.URL, "READPAST_TOKEN="+srv.Token)
					r := runner{t: t, driver: d.name, argv: argv, env: env}
					var wg sync.WaitGroup
					for _, sc := range scenarios {
						if !sc.Exclusive {
							wg.Add(1)
							go func() {
								defer wg.Done()
								ph.slots <- struct{}{}
								defer func() { <-ph.slots }()
								r.run(sc)
							}()
						}
					}
					wg.Wait()
					regularDone()
					ph.remaining.Wait()
					for _, sc := range scenarios {
						if sc.Exclusive {
							ph.mu.Lock()
							r.run(sc)
							ph.mu.Unlock()
						}
					}
				})
			}()
		}
	}
	wg.Wait()
	t.Logf("all scenarios, stores and drivers in %s", time.Since(start).Round(time.Millisecond))
}

// runner runs scenarios through one driver against one server.
type runner struct {
	t         *testing.T
	driver    string
	argv, env []string
}

// run runs sc as a subtest; a scenario that skips fails the test.
func (r runner) run(sc *scenario) {
	entered, finished := false, false
	passed := r.t.Run(sc.Name, func(t *testing.T) {
		entered = true
		started := time.Now()
		vars := map[string]any{"run": sc.Name + "-" + r.driver}
		sc.run(t, r.argv, r.env, vars)
		finished = true
		t.Logf("%d steps in %s", len(sc.Steps), time.Since(started).Round(time.Millisecond))
	})
	if passed && entered && !finished { // not left out by -run
		r.t.Errorf("scenario %s was skipped: a scenario must run to its end", sc.Name)
	}
}
