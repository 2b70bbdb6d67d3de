package readpast_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// Environment of a worker process started by TestMultiProcessWorkers.
const (
	envChildURL = "READPAST_MP_URL"
	envChildOut = "READPAST_MP_OUT"
)

// mpLease is the workers' lease. A job runs again without a kill when its
// completion reaches the database after the lease: a completion waits for
// a claim statement that locked its row while passing over it (claims.md,
// "What a claim's locks cost others"), and under a loaded CI machine claims
// and completions have taken over a second. Three seconds keeps those
// waits inside the lease and the kill's jobs rescued soon.
const mpLease = 3 * time.Second

// TestMultiProcessWorkerChild is the body of one worker process; it does
// nothing unless started by TestMultiProcessWorkers.
func TestMultiProcessWorkerChild(t *testing.T) {
	url, out := os.Getenv(envChildURL), os.Getenv(envChildOut)
	if url == "" {
		t.Skip("runs only as a child of TestMultiProcessWorkers")
	}
	ctx, record := childRecorder(t, out)
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := readpast.NewWorkers()
	w.Handle("work", func(ctx context.Context, job *readpast.Job) (any, error) {
		record("start %d %s %d %d", job.ID, job.Token, time.Now().UnixNano(), job.LeaseExpiresAt.UnixNano())
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		record("end %d %s %d", job.ID, job.Token, time.Now().UnixNano())
		return nil, nil
	}, nil)
	runClientUntil(ctx, t, s, readpast.Config{
		Workers: w, Lease: mpLease, PollInterval: 50 * time.Millisecond,
		// Its warnings (heartbeats and outcomes that failed) explain a failure.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues: map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: 16, FetchLimit: 8}},
	})
}

type execution struct {
	proc       int
	id         int64
	token      string
	start, end time.Time // end is zero when the process died first
	lease      time.Time // when the claim's lease expires unless extended
}

// TestMultiProcessWorkers runs four worker processes on one database,
// SIGKILLs one mid-run and starts a replacement, then checks the whole
// history: every job succeeded; a job ran more than once only when a run
// died with the killed process; and no two runs of one group overlapped,
// counting a killed run as holding its job until the process died or the
// claim's lease ran out, whichever came later.
func TestMultiProcessWorkers(t *testing.T) {
	if os.Getenv(envChildURL) != "" {
		t.Skip("child")
	}
	s := newPGStore(t)
	ctx := context.Background()
	const n = 3000
	ps := make([]readpast.EnqueueParams, n)
	groupOf := map[int]string{}
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "work", MaxAttempts: 100}
		if i%2 == 0 {
			ps[i].Group = fmt.Sprint("g", i%30)
		}
	}
	jobs, err := s.Enqueue(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		groupOf[int(j.ID)] = ps[i].Group
	}

	dir := t.TempDir()
	url := s.Pool().Config().ConnString()
	type child struct {
		cmd *exec.Cmd
		out string
	}
	start := func(i int) child {
		out := filepath.Join(dir, fmt.Sprintf("proc%d.log", i))
		return child{startChild(t, "TestMultiProcessWorkerChild", envChildURL+"="+url, envChildOut+"="+out), out}
	}
	children := []child{start(0), start(1), start(2), start(3)}
	defer func() {
		var cmds []*exec.Cmd
		for _, c := range children {
			cmds = append(cmds, c.cmd)
		}
		killChildren(cmds)
	}()

	succeeded := func() int64 {
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range st {
			if x.State == readpast.StateSucceeded {
				return x.Count
			}
		}
		return 0
	}
	waitFor(t, time.Minute, "some progress", func() bool { return succeeded() > n/4 })
	killed := 0
	if err := children[killed].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	children[killed].cmd.Wait()
	children = append(children, start(4))
	waitFor(t, 2*time.Minute, "every job to succeed", func() bool { return succeeded() == n })
	for _, c := range children[1:] {
		c.cmd.Process.Signal(syscall.SIGTERM)
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("worker process: %v", err)
		}
	}

	// Read every process's history.
	runs := map[string]*execution{}
	var all []*execution
	for i, c := range children {
		proc := i
		if i == len(children)-1 {
			proc = 4
		}
		f, err := os.Open(c.out)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || len(fields) != map[string]int{"start": 5, "end": 4}[fields[0]] {
				continue // a line cut by the kill
			}
			id, _ := strconv.ParseInt(fields[1], 10, 64)
			ns, _ := strconv.ParseInt(fields[3], 10, 64)
			at := time.Unix(0, ns)
			switch fields[0] {
			case "start":
				lease, _ := strconv.ParseInt(fields[4], 10, 64)
				e := &execution{proc: proc, id: id, token: fields[2], start: at, lease: time.Unix(0, lease)}
				runs[fields[1]+" "+fields[2]] = e
				all = append(all, e)
			case "end":
				if e := runs[fields[1]+" "+fields[2]]; e != nil {
					e.end = at
				}
			}
		}
		f.Close()
	}
	perJob := map[int64][]*execution{}
	for _, e := range all {
		if e.end.IsZero() {
			if e.proc != killed {
				t.Errorf("job %d: a run in live process %d never ended", e.id, e.proc)
				continue
			}
			// Held until the process died, or until the claim's lease ran
			// out if later. (Not killedAt+lease: the lease runs from the
			// claim, which under load came well before the run started,
			// and a rescue may rightly rerun the job sooner.)
			e.end = killedAt
			if e.lease.After(e.end) {
				e.end = e.lease
			}
		}
		perJob[e.id] = append(perJob[e.id], e)
	}
	dups := 0
	for _, j := range jobs {
		es := perJob[j.ID]
		if len(es) == 0 {
			t.Errorf("job %d never ran", j.ID)
			continue
		}
		final, err := s.Get(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if final.State != readpast.StateSucceeded {
			t.Errorf("job %d ended %s", j.ID, final.State)
		}
		if len(es) > 1 {
			dups++
			for _, e := range es[:len(es)-1] {
				if e.proc != killed {
					t.Errorf("job %d ran %d times, not only because of the killed process (killed at %s):%s", j.ID, len(es), killedAt.Format("15:04:05.000"), describeRuns(es))
				}
			}
		}
		if es[len(es)-1].token != final.Token {
			t.Errorf("job %d completed with token %s, its last run had %s", j.ID, final.Token, es[len(es)-1].token)
		}
	}
	perGroup := map[string][]*execution{}
	for _, e := range all {
		if g := groupOf[int(e.id)]; g != "" {
			perGroup[g] = append(perGroup[g], e)
		}
	}
	overlaps := 0
	for g, es := range perGroup {
		for i := range es {
			for k := i + 1; k < len(es); k++ {
				a, b := es[i], es[k]
				if a.start.Before(b.end) && b.start.Before(a.end) {
					overlaps++
					t.Errorf("group %s: runs of jobs %d and %d overlap", g, a.id, b.id)
				}
			}
		}
	}
	t.Logf("%d jobs, 5 processes (one SIGKILLed): %d runs, %d jobs re-run after the kill, %d group overlaps", n, len(all), dups, overlaps)
}

// describeRuns lists runs for a failure message: process, token, and the
// times of start, end and lease expiry.
func describeRuns(es []*execution) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "\n\tprocess %d token %s started %s ended %s lease until %s",
			e.proc, e.token, e.start.Format("15:04:05.000"), e.end.Format("15:04:05.000"), e.lease.Format("15:04:05.000"))
	}
	return b.String()
}
