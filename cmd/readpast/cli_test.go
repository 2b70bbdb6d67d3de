package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.1.2.3:1": true, "[::1]:80": true, "localhost:9": true, "LOCALHOST:9": true,
		":8080": false, "0.0.0.0:80": false, "[::]:80": false, "10.0.0.1:80": false, "example.com:80": false,
	} {
		got, err := isLoopback(addr)
		if err != nil || got != want {
			t.Errorf("isLoopback(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	if _, err := isLoopback("no-port"); err == nil {
		t.Error("isLoopback accepted an address without a port")
	}
}

func TestSplitTokens(t *testing.T) {
	got := splitTokens(" a, b ,,c ,")
	if strings.Join(got, "|") != "a|b|c" {
		t.Errorf("splitTokens = %q", got)
	}
	if splitTokens("") != nil {
		t.Error("splitTokens of nothing is not empty")
	}
}

// TestStringListRefusesEmpty: a repeatable flag (--key, --tag, serve's
// --token) given an empty value is an error, not an empty entry.
func TestStringListRefusesEmpty(t *testing.T) {
	var l stringList
	if err := l.Set("a"); err != nil || len(l) != 1 {
		t.Fatalf("Set(a) = %v, list %q", err, l)
	}
	if err := l.Set(""); err == nil || len(l) != 1 {
		t.Errorf("Set(\"\") = %v, list %q: want an error and the list unchanged", err, l)
	}
}

func TestReadJobLines(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lines, err := readJobLines(strings.NewReader("{\"kind\":\"a\"}\n\n  \n {\"kind\":\"b\",\"queue\":\"q\",\"priority\":2}\n"), now)
	if err != nil || len(lines) != 2 || string(lines[1]) != `{"kind":"b","queue":"q","priority":2}` {
		t.Fatalf("readJobLines = %q, %v", lines, err)
	}
	for input, want := range map[string]string{
		"{\"kind\":\"a\"}\n{\"kind\":\"a\",\"x\":1}\n": "line 2: x: unknown field",
		"\n\n{\"kind\":\"\"}":                          "line 3: kind",
		"not json":                                     "line 1:",
		"{\"kind\":\"a\",\"priority\":1e9}":            "line 1: priority",
	} {
		_, err := readJobLines(strings.NewReader(input), now)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("readJobLines(%q) error %v, want it to contain %q", input, err, want)
		}
	}
}

func TestRunUsage(t *testing.T) {
	ctx := context.Background()
	t.Chdir(t.TempDir()) // where a command left without a database would make readpast.db
	db := filepath.Join(t.TempDir(), "cli.db")
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{nil, 2, "Usage: readpast COMMAND"},
		{[]string{"help"}, 0, "Commands:"},
		{[]string{"nope"}, 2, "unknown command"},
		{[]string{"version", "extra"}, 2, "unexpected argument"},
		{[]string{"serve", "--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"serve", "--addr", "0.0.0.0:0", "--database-url", db}, 2, "refusing"},
		{[]string{"serve", "--log-format", "xml", "--database-url", db}, 2, "log-format"},
		{[]string{"serve", "--max-batch", "0"}, 2, "max-batch"},
		{[]string{"enqueue", "--database-url", db}, 2, "--kind"},
		{[]string{"enqueue", "--kind", "a", "--run-at", "soon", "--database-url", db}, 2, "--run-at"},
		{[]string{"jobs"}, 2, "missing action"},
		{[]string{"jobs", "dance"}, 2, "unknown action"},
		{[]string{"jobs", "show", "--database-url", db}, 2, "exactly one job id"},
		{[]string{"jobs", "show", "0", "--database-url", db}, 2, "positive integer"},
		{[]string{"jobs", "list", "--limit", "0", "--database-url", db}, 2, "limit"},
		{[]string{"migrate", "down", "--database-url", db}, 2, "unknown action"},
		{[]string{"stats", "extra", "--database-url", db}, 2, "unexpected argument"},
		{[]string{"stats", "-h"}, 0, "database-url"},
		{[]string{"serve", "--rescue-interval", "0"}, 2, "--rescue-interval must be positive"},
		{[]string{"serve", "--rescue-interval", "-1s"}, 2, "--rescue-interval must be positive"},
		{[]string{"stats", "--url", "http://x", "--database-url", db}, 2, "give one"},
		{[]string{"stats", "--token", "t", "--database-url", db}, 2, "--token is for a server"},
		{[]string{"stats", "--url", "ftp://x"}, 2, "want http://"},
		{[]string{"jobs", "show", "+1", "--database-url", db}, 2, "positive integer"},
		{[]string{"jobs", "show", "01", "--database-url", db}, 2, "positive integer"},
		// A flag given empty (an unset shell variable) is refused, not read
		// as left out: the job would go to the default queue, keyless.
		{[]string{"enqueue", "--kind", "a", "--queue", "", "--database-url", db}, 2, "--queue is empty"},
		{[]string{"enqueue", "--kind", "a", "--group=", "--database-url", db}, 2, "--group is empty"},
		{[]string{"enqueue", "--kind", "a", "--unique-key", "", "--database-url", db}, 2, "--unique-key is empty"},
		{[]string{"enqueue", "--kind", "a", "--run-at", "", "--database-url", db}, 2, "--run-at is empty"},
		{[]string{"enqueue", "--kind", "a", "--key", "k", "--key", "", "--database-url", db}, 2, "-key: is empty"},
		{[]string{"enqueue", "--kind", "a", "--tag", "", "--database-url", db}, 2, "-tag: is empty"},
		{[]string{"schedules", "set", "s", "--cron", "@hourly", "--kind", "a", "--queue", "", "--database-url", db}, 2, "--queue is empty"},
		{[]string{"schedules", "set", "s", "--cron", "@hourly", "--kind", "a", "--key", "", "--database-url", db}, 2, "--key is empty"},
		{[]string{"batches", "open", "--kind", "a", "--queue", "", "--database-url", db}, 2, "--queue is empty"},
		// Nor an empty target: it would pick the environment's, or
		// ./readpast.db.
		{[]string{"enqueue", "--kind", "a", "--database-url", ""}, 2, "--database-url is empty"},
		{[]string{"migrate", "--database-url="}, 2, "--database-url is empty"},
		{[]string{"enqueue", "--kind", "a", "--url", ""}, 2, "--url is empty"},
		{[]string{"enqueue", "--kind", "a", "--url", "http://127.0.0.1:9", "--token", ""}, 2, "--token is empty"},
		{[]string{"serve", "--addr", "", "--database-url", db}, 2, "--addr is empty"},
		{[]string{"schedules", "set", "s", "--cron", "@hourly", "--kind", "a", "--time-zone", "", "--database-url", db}, 2, "--time-zone is empty"},
		{[]string{"batches", "open", "--kind", "a b", "--database-url", db}, 2, "--kind:"},
		// A port out of range is refused before the database is opened.
		{[]string{"serve", "--addr", "127.0.0.1:99999", "--database-url", db}, 2, `port "99999"`},
		{[]string{"serve", "--addr", "127.0.0.1:http", "--database-url", db}, 2, `port "http"`},
		{[]string{"enqueue", "--kind", "a", "--unique-key", "k", "--unique-for", "0s", "--database-url", db}, 2, "--unique-for must be"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(ctx, c.args, &stdout, &stderr)
		for _, f := range []string{db, "readpast.db"} {
			if _, err := os.Stat(f); err == nil {
				t.Fatalf("readpast %v made a database (%s): a refused command must touch nothing", c.args, f)
			}
		}
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.out) {
			t.Errorf("readpast %v: exit %d, want %d; output %q, want it to contain %q",
				c.args, code, c.code, stdout.String()+stderr.String(), c.out)
		}
	}
}

// TestFlagErrorOnce: a bad flag is reported once, with a hint, and -h
// prints the flags to stdout. (The flag package used to print the error
// and the whole usage, and run printed the error again.)
func TestFlagErrorOnce(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--no-such-flag"}, &stdout, &stderr)
	want := "readpast serve: flag provided but not defined: -no-such-flag\nRun 'readpast serve -h' for usage.\n"
	if code != 2 || stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("bad flag: exit %d, stdout %q, stderr %q; want stderr %q", code, stdout.String(), stderr.String(), want)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"serve", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "-rescue-interval") || stderr.Len() != 0 {
		t.Errorf("serve -h: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestTargetResolve: flags win over the environment, $READPAST_URL over
// $READPAST_DATABASE_URL, and a server at the default address when
// nothing is set.
func TestTargetResolve(t *testing.T) {
	for _, tc := range []struct {
		url, token, db string
		env            map[string]string
		want           target
	}{
		{want: target{url: defaultURL}},
		{env: map[string]string{envToken: "tk"}, want: target{url: defaultURL, token: "tk"}},
		{env: map[string]string{envURL: "http://a"}, want: target{url: "http://a"}},
		{env: map[string]string{envDatabaseURL: "x.db"}, want: target{database: "x.db"}},
		{env: map[string]string{envDatabaseURL: "x.db", envURL: "http://a", envToken: "tk"}, want: target{url: "http://a", token: "tk"}},
		{url: "http://b", env: map[string]string{envDatabaseURL: "x.db", envURL: "http://a"}, want: target{url: "http://b"}},
		{db: "y.db", env: map[string]string{envURL: "http://a", envToken: "tk"}, want: target{database: "y.db"}},
		{token: "t2", env: map[string]string{envDatabaseURL: "x.db"}, want: target{url: defaultURL, token: "t2"}},
	} {
		f := &targetFlags{url: &tc.url, token: &tc.token, database: &tc.db}
		got, err := f.resolve(func(k string) string { return tc.env[k] })
		if err != nil || got != tc.want {
			t.Errorf("resolve(url %q, token %q, db %q, env %v) = %+v, %v; want %+v", tc.url, tc.token, tc.db, tc.env, got, err, tc.want)
		}
	}
}

func TestEnqueueFromStdinInProcess(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "cli.db")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"migrate", "--database-url", db}, &stdout, &stderr); code != 0 {
		t.Fatalf("migrate: %s", stderr.String())
	}
	lines := strings.Repeat("{\"kind\":\"bulk\",\"queue\":\"bulk\"}\n", enqueueBatchSize+5)
	if err := enqueueFrom(ctx, strings.NewReader(lines), []string{"--stdin", "--database-url", db}, &stdout, &stderr); err != nil {
		t.Fatalf("enqueue --stdin: %v (%s)", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "enqueued 1005 jobs") {
		t.Errorf("stdout = %q", stdout.String())
	}
	stdout.Reset()
	if err := runStats(ctx, []string{"--database-url", db}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "\nbulk   0        1005 ") {
		t.Errorf("stats = %q", stdout.String())
	}
	// A bad last line enqueues nothing.
	bad := strings.Repeat("{\"kind\":\"more\",\"queue\":\"bulk\"}\n", 10) + "{\"kind\":\n"
	err := enqueueFrom(ctx, strings.NewReader(bad), []string{"--stdin", "--database-url", db}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "line 11") {
		t.Fatalf("bad line: %v", err)
	}
	stdout.Reset()
	if err := runStats(ctx, []string{"--database-url", db}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "\nbulk   0        1005 ") {
		t.Errorf("stats after a bad input = %q", stdout.String())
	}
}

// TestBenchCPUProfile: bench --cpuprofile writes a profile go tool pprof
// reads (gzip-compressed), and a file it cannot create is an error.
func TestBenchCPUProfile(t *testing.T) {
	ctx := context.Background()
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"bench", "--scenarios", "insert", "--scale", "0.01", "--cpuprofile", prof}, &stdout, &stderr); code != 0 {
		t.Fatalf("bench --cpuprofile: exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the profile (%d bytes) is not a gzip-compressed pprof profile", len(b))
	}
	stderr.Reset()
	bad := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	if code := run(ctx, []string{"bench", "--scenarios", "insert", "--scale", "0.01", "--cpuprofile", bad}, &stdout, &stderr); code == 0 {
		t.Errorf("bench --cpuprofile %s: exit 0, want an error", bad)
	}
}
