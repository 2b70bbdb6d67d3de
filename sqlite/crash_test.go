package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// Environment of the child process of TestCrashKill.
const (
	crashEnvDB  = "READPAST_SQLITE_CRASH_DB"
	crashEnvLog = "READPAST_SQLITE_CRASH_LOG"
)

// crashLease is the lease the crashing worker claims with.
const crashLease = 300 * time.Millisecond

// TestCrashKill SIGKILLs a worker process in the middle of enqueues, claims
// and completions, three times, then checks that every acknowledged enqueue
// and completion survived, the file is intact, and the jobs the dead
// worker held come back after their lease and drain.
func TestCrashKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.db")
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var logs []string
	for cycle := range 3 {
		log := filepath.Join(dir, fmt.Sprintf("crash-%d.log", cycle))
		logs = append(logs, log)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWorker$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnvDB+"="+path, crashEnvLog+"="+log)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it 700 ms after it has started working (its first line),
		// however long a loaded machine takes to start it.
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if st, err := os.Stat(log); err == nil && st.Size() > 0 {
				break
			}
		}
		time.Sleep(700 * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("cycle %d: worker ended with %v before it was killed\n%s", cycle, err, out.String())
		}
	}

	var ok string
	if err := s.DB().QueryRow("PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check: %q %v", ok, err)
	}
	enqueued, completed := map[int64]bool{}, map[int64]bool{}
	for _, log := range logs {
		b, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) { // none: killed before it began
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			op, idText, found := strings.Cut(line, " ")
			id, err := strconv.ParseInt(idText, 10, 64)
			if !found || err != nil {
				continue // the last line may be cut short by the kill
			}
			switch op {
			case "enqueued":
				enqueued[id] = true
			case "completed":
				completed[id] = true
			}
		}
	}
	if len(enqueued) == 0 || len(completed) == 0 {
		t.Fatalf("the worker did too little before the kill: %d enqueued, %d completed", len(enqueued), len(completed))
	}
	for id := range enqueued {
		if _, err := s.Get(ctx, id); err != nil {
			t.Errorf("acknowledged enqueue of job %d lost: %v", id, err)
		}
	}
	for id := range completed {
		if j, err := s.Get(ctx, id); err != nil || j.State != readpast.StateSucceeded {
			t.Errorf("acknowledged completion of job %d lost: %+v %v", id, j, err)
		}
	}

	// The dead workers' claims expire, are rescued, and everything drains.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := s.RescueExpired(ctx, 1000); err != nil {
			t.Fatal(err)
		}
		jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: "parent", Limit: 1000, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cs := make([]readpast.Completion, len(jobs))
		for i, j := range jobs {
			cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
		}
		if _, err := s.Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		live := int64(0)
		for _, x := range st {
			if !x.State.Final() {
				live += x.Count
			}
		}
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("jobs still live after the drain: %+v", st)
		}
		time.Sleep(crashLease / 3)
	}
	t.Logf("3 kills: %d acknowledged enqueues and %d acknowledged completions all kept", len(enqueued), len(completed))
}

// TestCrashWorker is the child of TestCrashKill: it enqueues, claims and
// completes until it is killed, logging every acknowledged operation with
// one write each (a write survives SIGKILL).
func TestCrashWorker(t *testing.T) {
	path := os.Getenv(crashEnvDB)
	if path == "" {
		t.Skip("run by TestCrashKill in a child process")
	}
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(os.Getenv(crashEnvLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]readpast.EnqueueParams, 10)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "crash", MaxAttempts: 100}
	}
	for i := 0; ; i++ {
		jobs, err := s.Enqueue(ctx, ps)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, j := range jobs {
			fmt.Fprintf(&b, "enqueued %d\n", j.ID)
		}
		if _, err := log.WriteString(b.String()); err != nil {
			t.Fatal(err)
		}
		got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "doomed", Limit: 10, Lease: crashLease})
		if err != nil {
			t.Fatal(err)
		}
		// Complete half; the rest stay running when the kill comes.
		cs := make([]readpast.Completion, 0, len(got))
		for k, j := range got {
			if (i+k)%2 == 0 {
				cs = append(cs, readpast.Completion{ID: j.ID, Token: j.Token})
			}
		}
		res, err := s.Complete(ctx, cs)
		if err != nil {
			t.Fatal(err)
		}
		b.Reset()
		for k, c := range cs {
			if res[k] == nil {
				fmt.Fprintf(&b, "completed %d\n", c.ID)
			}
		}
		if _, err := log.WriteString(b.String()); err != nil {
			t.Fatal(err)
		}
	}
}
