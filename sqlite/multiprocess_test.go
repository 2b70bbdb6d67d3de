package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// The multi-process test runs this test binary again as worker processes
// that share one database file. These variables tell a child what to do.
const (
	mpEnvWorker = "READPAST_SQLITE_MP_WORKER" // worker number
	mpEnvDB     = "READPAST_SQLITE_MP_DB"     // database path
	mpEnvLog    = "READPAST_SQLITE_MP_LOG"    // history file to write
)

const (
	mpProcesses = 4
	mpJobs      = 1500
	mpGroups    = 8
)

// TestMultiProcess drains one file with several OS processes that claim in
// batches with short leases (some workers outlive them) and complete, then
// checks the merged histories: every job completed exactly once, no job
// claimed again while a lease was valid, no two jobs of a group held at
// once, nothing left running.
func TestMultiProcess(t *testing.T) {
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
	nJobs := mpJobs
	if raceEnabled {
		nJobs = mpJobs / 3
	}
	ps := make([]readpast.EnqueueParams, nJobs)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "mp", Priority: i % 3, MaxAttempts: 100}
		if i%5 == 0 {
			ps[i].Group = fmt.Sprint("g", i%mpGroups)
		}
	}
	jobs, err := s.Enqueue(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	type child struct {
		cmd *exec.Cmd
		out bytes.Buffer
		log string
	}
	children := make([]*child, mpProcesses)
	for i := range children {
		c := &child{log: filepath.Join(dir, fmt.Sprintf("history-%d.log", i))}
		c.cmd = exec.CommandContext(runCtx, os.Args[0], "-test.run=^TestMultiProcessWorker$", "-test.count=1", "-test.v")
		c.cmd.Env = append(os.Environ(), mpEnvWorker+"="+strconv.Itoa(i), mpEnvDB+"="+path, mpEnvLog+"="+c.log)
		c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = c
	}
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("worker process %d: %v\n%s", i, err, c.out.String())
		}
	}
	elapsed := time.Since(start)
	if t.Failed() {
		t.FailNow()
	}

	var evs []mpEvent
	for _, c := range children {
		e, err := readHistory(c.log)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e...)
	}
	claims, stale := checkMultiProcess(t, jobs, evs)

	// Nothing left pending or running; every job succeeded.
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range st {
		if x.State != readpast.StateSucceeded || x.Count != int64(nJobs) {
			t.Errorf("after the run: %+v, want %d succeeded and nothing else", x, nJobs)
		}
	}
	var running int
	if err := s.DB().QueryRow(`SELECT count(*) FROM readpast_groups WHERE running > 0`).Scan(&running); err != nil || running != 0 {
		t.Errorf("%d groups still hold slots (%v)", running, err)
	}
	t.Logf("%d processes, %d jobs: %d claims, %d stale completions refused, %.0f jobs/s",
		mpProcesses, nJobs, claims, stale, float64(nJobs)/elapsed.Seconds())
	if stale == 0 {
		t.Log("no lease expired during the run; fencing across processes was not exercised")
	}
}

// TestMultiProcessWorker is the child of TestMultiProcess; it skips when
// run directly.
func TestMultiProcessWorker(t *testing.T) {
	worker := os.Getenv(mpEnvWorker)
	if worker == "" {
		t.Skip("run by TestMultiProcess in a child process")
	}
	n, _ := strconv.Atoi(worker)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	s, err := sqlite.Open(ctx, os.Getenv(mpEnvDB), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go readpast.RunRescuer(ctx, s, 50*time.Millisecond, slog.New(slog.DiscardHandler))

	f, err := os.Create(os.Getenv(mpEnvLog))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	defer func() {
		if err := w.Flush(); err != nil {
			t.Error(err)
		}
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}()

	rng := rand.New(rand.NewPCG(uint64(n), uint64(time.Now().UnixNano())))
	name := "p" + worker
	for ctx.Err() == nil {
		lease := 200*time.Millisecond + time.Duration(rng.Int64N(int64(800*time.Millisecond)))
		inv := time.Now()
		got, err := s.Claim(ctx, readpast.ClaimParams{Worker: name, Limit: 1 + rng.IntN(50), Lease: lease})
		ret := time.Now()
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(got) == 0 {
			st, err := s.Stats(ctx)
			if err != nil {
				t.Fatalf("stats: %v", err)
			}
			left := false
			for _, x := range st {
				left = left || x.State == readpast.StatePending || x.State == readpast.StateRunning
			}
			if !left {
				return
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		for _, j := range got {
			g := "-"
			if j.Group != nil {
				g = *j.Group
			}
			fmt.Fprintf(w, "claim\t%d\t%s\t%d\t%d\t%d\t%s\n", j.ID, j.Token, inv.UnixNano(), ret.UnixNano(), lease, g)
		}
		if rng.IntN(15) == 0 {
			time.Sleep(lease + 50*time.Millisecond) // outlive the lease
		} else {
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
		cs := make([]readpast.Completion, len(got))
		for i, j := range got {
			cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
		}
		inv = time.Now()
		res, err := s.Complete(ctx, cs)
		ret = time.Now()
		if err != nil {
			t.Fatalf("complete: %v", err)
		}
		for i, c := range cs {
			ok := 0
			if res[i] == nil {
				ok = 1
			} else if !errors.Is(res[i], readpast.ErrStaleToken) {
				t.Fatalf("complete %d: %v", c.ID, res[i])
			}
			fmt.Fprintf(w, "complete\t%d\t%s\t%d\t%d\t%d\n", c.ID, c.Token, inv.UnixNano(), ret.UnixNano(), ok)
		}
	}
	t.Fatalf("worker %s: %v before the queue drained", worker, ctx.Err())
}

// mpEvent is one line of a worker's history.
type mpEvent struct {
	op            string
	id            int64
	token         string
	invoked, ret  time.Time
	lease         time.Duration // claim
	group         string        // claim; "" for none
	accepted      bool          // complete
	completionInv time.Time     // claim: invocation of its accepted completion
}

func readHistory(path string) ([]mpEvent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var evs []mpEvent
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		bad := fmt.Errorf("%s: bad line %q", path, line)
		if len(f) < 6 {
			return nil, bad
		}
		var e mpEvent
		e.op = f[0]
		e.id, _ = strconv.ParseInt(f[1], 10, 64)
		e.token = f[2]
		inv, _ := strconv.ParseInt(f[3], 10, 64)
		ret, _ := strconv.ParseInt(f[4], 10, 64)
		e.invoked, e.ret = time.Unix(0, inv), time.Unix(0, ret)
		switch {
		case e.op == "claim" && len(f) == 7:
			l, _ := strconv.ParseInt(f[5], 10, 64)
			e.lease = time.Duration(l)
			if f[6] != "-" {
				e.group = f[6]
			}
		case e.op == "complete" && len(f) == 6:
			e.accepted = f[5] == "1"
		default:
			return nil, bad
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// checkMultiProcess checks the merged histories of all workers.
func checkMultiProcess(t *testing.T, jobs []*readpast.Job, evs []mpEvent) (claims, stale int) {
	t.Helper()
	// A token is a claim's (all jobs of one claim share it), so a claim of
	// a job is known by the job's id and the token.
	type pair struct {
		id    int64
		token string
	}
	byClaim := map[pair]*mpEvent{}
	perJob := map[int64][]*mpEvent{}
	for i := range evs {
		e := &evs[i]
		if e.op != "claim" {
			continue
		}
		claims++
		if byClaim[pair{e.id, e.token}] != nil {
			t.Errorf("job %d handed out twice with token %s", e.id, e.token)
		}
		byClaim[pair{e.id, e.token}] = e
		perJob[e.id] = append(perJob[e.id], e)
	}
	accepted := map[int64][]*mpEvent{}
	for i := range evs {
		e := &evs[i]
		if e.op != "complete" {
			continue
		}
		c := byClaim[pair{e.id, e.token}]
		if c == nil {
			t.Errorf("completion of job %d with a token no claim of it returned", e.id)
			continue
		}
		if !e.accepted {
			stale++
			continue
		}
		accepted[e.id] = append(accepted[e.id], e)
		c.completionInv = e.invoked
	}
	for _, j := range jobs {
		if n := len(accepted[j.ID]); n != 1 {
			t.Errorf("job %d: %d accepted completions, want exactly 1", j.ID, n)
			continue
		}
		cl := perJob[j.ID]
		sort.Slice(cl, func(a, b int) bool { return cl[a].ret.Before(cl[b].ret) })
		if last := cl[len(cl)-1]; last.token != accepted[j.ID][0].token {
			t.Errorf("job %d: accepted completion used token %s, not that of the last claim", j.ID, accepted[j.ID][0].token)
		}
		// The store took claim k at or after its lease started (>= invoked),
		// so claim k's lease was valid until at least invoked+lease; the next
		// claim must have returned after that.
		for k := 1; k < len(cl); k++ {
			prev, next := cl[k-1], cl[k]
			if validUntil := prev.invoked.Add(prev.lease); next.ret.Before(validUntil) {
				t.Errorf("job %d claimed again at %v while the previous lease was valid until %v",
					j.ID, next.ret.Format(time.StampMicro), validUntil.Format(time.StampMicro))
			}
		}
	}
	// Per group: the windows in which a claim surely held the group's slot
	// (returned .. the earlier of lease end and its accepted completion's
	// invocation) never overlap.
	type window struct{ from, to time.Time }
	byGroup := map[string][]window{}
	for _, c := range byClaim {
		if c.group == "" {
			continue
		}
		to := c.invoked.Add(c.lease)
		if !c.completionInv.IsZero() && c.completionInv.Before(to) {
			to = c.completionInv
		}
		if to.After(c.ret) {
			byGroup[c.group] = append(byGroup[c.group], window{c.ret, to})
		}
	}
	for g, ws := range byGroup {
		sort.Slice(ws, func(a, b int) bool { return ws[a].from.Before(ws[b].from) })
		end := time.Time{}
		for _, w := range ws {
			if w.from.Before(end) {
				t.Errorf("group %s: two jobs held at once around %v", g, w.from.Format(time.StampMicro))
			}
			if w.to.After(end) {
				end = w.to
			}
		}
	}
	return claims, stale
}
