package readpast_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/stores"
)

// Environment of a child process of TestMultiProcessUniqueAndSchedules.
const (
	envUniqueURL   = "READPAST_MPU_URL"
	envUniqueStart = "READPAST_MPU_START"
	envUniqueDone  = "READPAST_MPU_DONE" // a folder: the child creates a file there once its enqueues are done
)

const (
	mpuRounds     = 30 // keys every process enqueues, at once
	mpuGoroutines = 6  // enqueuers of each key in each process
)

// TestMultiProcessUniqueChild is the body of one child process: at the
// agreed start time it enqueues each of mpuRounds keys from mpuGoroutines
// goroutines at once, then runs a scheduler until SIGTERM. It does nothing
// unless started by TestMultiProcessUniqueAndSchedules.
func TestMultiProcessUniqueChild(t *testing.T) {
	url := os.Getenv(envUniqueURL)
	if url == "" {
		t.Skip("runs only as a child of TestMultiProcessUniqueAndSchedules")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	s, err := stores.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	startNS, _ := strconv.ParseInt(os.Getenv(envUniqueStart), 10, 64)
	// Every process starts at the same full second, so the schedulers'
	// looks (every 50 ms) fall together on the ticks and race for them.
	time.Sleep(time.Until(time.Unix(0, startNS)))
	go readpast.RunScheduler(ctx, s, 50*time.Millisecond, nil)
	for r := range mpuRounds {
		var wg sync.WaitGroup
		for range mpuGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "mpu", UniqueKey: fmt.Sprint("mp-", r)}}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	if err := os.WriteFile(filepath.Join(os.Getenv(envUniqueDone), strconv.Itoa(os.Getpid())), nil, 0o644); err != nil {
		t.Error(err)
	}
	<-ctx.Done()
}

// TestMultiProcessUniqueAndSchedules runs four processes on one database
// (SQLite file, then PostgreSQL). Each enqueues the same unique keys from
// several goroutines at once while running a scheduler of an @every 1s
// schedule; one process is SIGKILLed halfway. Every key makes exactly one
// job, and the schedule makes exactly one job per tick, no tick skipped,
// for as long as any scheduler runs.
func TestMultiProcessUniqueAndSchedules(t *testing.T) {
	if os.Getenv(envUniqueURL) != "" {
		t.Skip("child")
	}
	t.Run("sqlite", func(t *testing.T) {
		runMultiProcessUnique(t, filepath.Join(t.TempDir(), "mpu.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		runMultiProcessUnique(t, pgtest.URL(t))
	})
}

func runMultiProcessUnique(t *testing.T, url string) {
	ctx := context.Background()
	s, err := stores.Open(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutSchedule(ctx, readpast.ScheduleParams{Name: "beat", Cron: "@every 1s", Job: readpast.EnqueueParams{Kind: "beat"}}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	start := begin.Truncate(time.Second).Add(2 * time.Second)
	done := t.TempDir()
	var children []*exec.Cmd
	for range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMultiProcessUniqueChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envUniqueURL+"="+url, envUniqueStart+"="+strconv.FormatInt(start.UnixNano(), 10),
			envUniqueDone+"="+done)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children = append(children, cmd)
	}
	defer func() {
		for _, c := range children {
			if c.ProcessState == nil {
				c.Process.Kill()
				c.Wait()
			}
		}
	}()
	time.Sleep(time.Until(start) + 3*time.Second)
	if err := children[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	children[0].Wait()
	time.Sleep(3 * time.Second)
	// The survivors finish their enqueues first, however slow the machine
	// (SQLite's writers take turns): a SIGTERM would cut them short.
	for _, c := range children[1:] {
		marker := filepath.Join(done, strconv.Itoa(c.Process.Pid))
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("child %d did not finish its enqueues in 2 minutes", c.Process.Pid)
			}
		}
	}
	stopped := time.Now()
	for _, c := range children[1:] {
		c.Process.Signal(syscall.SIGTERM)
		if err := c.Wait(); err != nil {
			t.Errorf("child: %v", err)
		}
	}

	// Exactly one job per key.
	perKey := map[string]int{}
	res, err := s.List(ctx, readpast.ListParams{Kind: "mpu", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range res.Jobs {
		perKey[j.UniqueKey]++
	}
	for r := range mpuRounds {
		if n := perKey[fmt.Sprint("mp-", r)]; n != 1 {
			t.Errorf("key mp-%d: %d jobs from %d enqueuers in 4 processes, want 1", r, n, 4*mpuGoroutines)
		}
	}
	// Exactly one job per tick, none skipped from the first tick to the
	// last second the schedulers ran.
	runs, err := s.ScheduleRuns(ctx, "beat", 100)
	if err != nil {
		t.Fatal(err)
	}
	beats, err := s.List(ctx, readpast.ListParams{Kind: "beat", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(beats.Jobs) != len(runs) {
		t.Errorf("%d jobs for %d ticks", len(beats.Jobs), len(runs))
	}
	if len(runs) < 2 {
		t.Fatalf("%d ticks in %v", len(runs), stopped.Sub(begin))
	}
	first, last := runs[len(runs)-1].Tick, runs[0].Tick
	if want := int(last.Sub(first)/time.Second) + 1; len(runs) != want {
		t.Errorf("%d runs from %v to %v, want %d: a tick was skipped or made twice", len(runs), first, last, want)
	}
	if first.Sub(start) > 2*time.Second || stopped.Sub(last) > 2*time.Second {
		t.Errorf("ticks from %v to %v, schedulers ran from %v to %v", first, last, start, stopped)
	}
	t.Logf("%d keys, %d ticks over %v", len(perKey), len(runs), last.Sub(first))
}
