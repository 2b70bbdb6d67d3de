package testbin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
)

// typeScriptBuildTimeout bounds the install and the build together.
const typeScriptBuildTimeout = 10 * time.Minute

// TypeScript is the TypeScript client (clients/typescript) of one test
// process, installed and built once. Its zero value is ready; declare one
// per test package.
//
// Test packages run in processes of their own, side by side, on the same
// folder: Build holds an exclusive lock (flock on
// clients/typescript/.build.lock) while it checks and rebuilds, so that
// one process installs and builds while the others wait, then find the
// package up to date.
type TypeScript struct {
	once sync.Once
	dir  string
	npm  string
	skip string
	err  error
	log  []string
	// logged: the first caller logs what the build did.
	logged sync.Once
}

// Build makes clients/typescript ready to use and returns its absolute
// path: `npm ci` when node_modules is missing or older than
// package-lock.json, then `npm run build` when dist/index.js is missing
// or older than package.json, package-lock.json, tsconfig.json, any file
// under src/ or httpapi/openapi.json. It does this at most once per
// process; a failure fails t and every later caller. Without node or npm
// it skips t, or fails it under CI=true.
func (ts *TypeScript) Build(t testing.TB) string {
	t.Helper()
	ts.Prepare()
	var done []string // what the build did, for the first caller's log
	ts.logged.Do(func() { done = ts.log })
	for _, l := range done {
		t.Log(l)
	}
	if ts.skip != "" {
		if pgtest.InCI() {
			t.Fatalf("%s: under CI=true the TypeScript client cannot be skipped", ts.skip)
		}
		t.Skipf("%s: skipping the TypeScript client", ts.skip)
	}
	if ts.err != nil {
		t.Fatal(ts.err)
	}
	return ts.dir
}

// Prepare does Build's work without a test to report to, for a
// goroutine that starts it early; Build then reports its outcome.
func (ts *TypeScript) Prepare() {
	ts.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), typeScriptBuildTimeout)
		defer cancel()
		ts.build(ctx)
	})
}

// Npm returns a command running npm with args in the package's folder,
// its cache in the folder's .npm-cache (nothing is written outside it),
// and env added to the environment (which has no READPAST_ variables of
// this process). Call it after Build.
func (ts *TypeScript) Npm(ctx context.Context, args []string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, ts.npm, args...)
	cmd.Dir = ts.dir
	cmd.Env = append(append(Environ(),
		"npm_config_cache="+filepath.Join(ts.dir, ".npm-cache"),
		"npm_config_update_notifier=false",
		"npm_config_fund=false",
		"npm_config_audit=false",
	), env...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

func (ts *TypeScript) logf(format string, args ...any) {
	ts.log = append(ts.log, fmt.Sprintf(format, args...))
}

func (ts *TypeScript) build(ctx context.Context) {
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		missing = append(missing, "npm")
	}
	if len(missing) > 0 {
		ts.skip = strings.Join(missing, " and ") + " not found"
		return
	}
	ts.npm = npm
	root, err := moduleRoot()
	if err != nil {
		ts.err = err
		return
	}
	ts.dir = filepath.Join(root, "clients", "typescript")
	unlock, err := lockFile(filepath.Join(ts.dir, ".build.lock"))
	if err != nil {
		ts.err = err
		return
	}
	defer unlock()
	if why := depsStale(ts.dir); why != "" {
		start := time.Now()
		if out, err := ts.Npm(ctx, []string{"ci", "--no-audit", "--no-fund"}).CombinedOutput(); err != nil {
			ts.err = fmt.Errorf("npm ci in %s (%s): %w\n%s", ts.dir, why, err, out)
			return
		}
		ts.logf("npm ci (%s) took %s", why, time.Since(start).Round(time.Millisecond))
	}
	why, err := buildStale(root, ts.dir)
	if err != nil {
		ts.err = err
		return
	}
	if why != "" {
		start := time.Now()
		if out, err := ts.Npm(ctx, []string{"run", "build"}).CombinedOutput(); err != nil {
			ts.err = fmt.Errorf("npm run build in %s (%s): %w\n%s", ts.dir, why, err, out)
			return
		}
		ts.logf("npm run build (%s) took %s", why, time.Since(start).Round(time.Millisecond))
	}
}

// moduleRoot is the folder of the go.mod above the working directory
// (a test runs in its package's folder).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

// lockFile takes an exclusive flock on path (created if need be), waiting
// for another holder, and returns its release. The file stays: removing
// it would let two processes lock two different files.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// depsStale says why dir's node_modules must be installed again, or ""
// when it need not: missing, or installed from another package-lock.json
// (npm keeps the one it installed from as node_modules/.package-lock.json;
// a lock file changed since is newer than it).
func depsStale(dir string) string {
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err.Error()
	}
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "node_modules is not installed"
	}
	if err != nil {
		return err.Error()
	}
	if lock.ModTime().After(installed.ModTime()) {
		return "package-lock.json is newer than node_modules"
	}
	return ""
}

// buildStale says why dir (in the module at root) must be built again, or "" when it need not:
// dist/index.js (the package's entry, written by every build) is missing,
// or older than one of the build's inputs: the package's manifest, lock
// file and tsconfig.json, a file under src/, or the OpenAPI document the
// types are generated from.
func buildStale(root, dir string) (string, error) {
	built, err := os.Stat(filepath.Join(dir, "dist", "index.js"))
	if errors.Is(err, fs.ErrNotExist) {
		return "dist is not built", nil
	}
	if err != nil {
		return "", fmt.Errorf("dist: %w", err)
	}
	inputs := []string{
		filepath.Join(dir, "package.json"),
		filepath.Join(dir, "package-lock.json"),
		filepath.Join(dir, "tsconfig.json"),
		filepath.Join(root, "httpapi", "openapi.json"),
	}
	err = filepath.WalkDir(filepath.Join(dir, "src"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			inputs = append(inputs, p)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("TypeScript sources: %w", err)
	}
	for _, p := range inputs {
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("build input: %w", err)
		}
		if fi.ModTime().After(built.ModTime()) {
			rel, _ := filepath.Rel(root, p)
			return rel + " is newer than dist", nil
		}
	}
	return "", nil
}
