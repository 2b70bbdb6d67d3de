package main

import (
	"bytes"
	"context"
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

func TestInCI(t *testing.T) {
	for v, want := range map[string]bool{
		"true": true, "1": true, "TRUE": true, "True": true, "t": true,
		"": false, "false": false, "0": false, "no": false,
	} {
		t.Setenv("CI", v)
		if got := inCI(); got != want {
			t.Errorf("inCI() with CI=%q = %v, want %v", v, got, want)
		}
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

func TestReadJobLines(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ps, err := readJobLines(strings.NewReader("{\"kind\":\"a\"}\n\n  \n{\"kind\":\"b\",\"queue\":\"q\",\"priority\":2}\n"), now)
	if err != nil || len(ps) != 2 || ps[1].Queue != "q" || ps[1].Priority != 2 || !ps[0].RunAt.Equal(now) {
		t.Fatalf("readJobLines = %+v, %v", ps, err)
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
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(ctx, c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.out) {
			t.Errorf("readpast %v: exit %d, want %d; output %q, want it to contain %q",
				c.args, code, c.code, stdout.String()+stderr.String(), c.out)
		}
	}
}

func TestEnqueueFromStdinInProcess(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "cli.db")
	var stdout, stderr bytes.Buffer
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
	if !strings.Contains(stdout.String(), "\nbulk   1005 ") {
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
	if !strings.Contains(stdout.String(), "\nbulk   1005 ") {
		t.Errorf("stats after a bad input = %q", stdout.String())
	}
}
