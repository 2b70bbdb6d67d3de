package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Adversarial: two stores on one file, several goroutines mixing every
// finisher with claims of jobs of several keys. Checked: (a) every key's
// running counter equals the running jobs naming it, (b) no key runs more
// than its concurrency, (c) a rate-limited key never starts more than
// Rate*T/Per+Burst jobs over a span T, (d) every job finishes once the
// chaos stops (no lost wake-up).

var advLimits = map[string]int{"a": 1, "b": 2, "c:1": 2, "c:2": 2, "g0": 1, "g1": 1, "g2": 3, "g3": 1, "r": 0}

const (
	advRate  = 40
	advPer   = time.Second
	advBurst = 2
)

func advLimitOf(key string) int {
	if n, ok := advLimits[key]; ok {
		return n
	}
	return 1
}

// advKeyCounts returns, in one read transaction, the running counts the
// rows keep and the running jobs naming each key.
func advKeyCounts(t *testing.T, s *Store) (rows, jobs map[string]int) {
	t.Helper()
	// A read on a WAL database can meet SQLITE_BUSY while another
	// connection checkpoints; the store's own reads retry it, and so does
	// this one.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		rows, jobs, err = advReadKeyCounts(s)
		if err == nil {
			return rows, jobs
		}
		if !IsUnavailable(err) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// advReadKeyCounts reads, in one transaction, each key row's running
// count and how many running jobs name each key.
func advReadKeyCounts(s *Store) (rows, jobs map[string]int, err error) {
	tx, err := s.DB().BeginTx(context.Background(), nil)
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	read := func(q string) (map[string]int, error) {
		r, err := tx.Query(q)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		out := map[string]int{}
		for r.Next() {
			var k string
			var n int
			if err := r.Scan(&k, &n); err != nil {
				return nil, err
			}
			if n != 0 {
				out[k] = n
			}
		}
		return out, r.Err()
	}
	if rows, err = read(`SELECT group_key, running FROM readpast_groups`); err != nil {
		return nil, nil, err
	}
	jobs, err = read(`WITH jk(k) AS (
    SELECT group_key FROM readpast_jobs WHERE state = 'running' AND group_key IS NOT NULL
    UNION ALL
    SELECT value FROM readpast_jobs, json_each(readpast_jobs.more_keys) WHERE state = 'running' AND more_keys IS NOT NULL)
SELECT k, count(*) FROM jk GROUP BY k`)
	return rows, jobs, err
}

func advCheckCountsBound(t *testing.T, s *Store, what string, bound bool) bool {
	t.Helper()
	rows, jobs := advKeyCounts(t, s)
	ok := true
	for k := range mapsUnion(rows, jobs) {
		if rows[k] != jobs[k] {
			t.Errorf("%s: key %s: row counts %d running, %d running jobs name it", what, k, rows[k], jobs[k])
			ok = false
		}
		if l := advLimitOf(k); bound && l > 0 && jobs[k] > l {
			t.Errorf("%s: key %s runs %d jobs, concurrency %d", what, k, jobs[k], l)
			ok = false
		}
	}
	return ok
}

func mapsUnion(a, b map[string]int) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func advRandomKeys(r *rand.Rand) []string {
	firsts := []string{"g0", "g1", "g2", "g3", "c:1", "c:2"}
	pool := []string{"a", "b", "r", "c:1", "c:2", "g0", "g2"}
	keys := []string{firsts[r.IntN(len(firsts))]}
	n := r.IntN(4) // 0..3 later keys
	for len(keys) < 1+n {
		k := pool[r.IntN(len(pool))]
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if r.IntN(8) == 0 {
		return nil // no key at all
	}
	return keys
}

type advHeld struct {
	mu   sync.Mutex
	jobs map[int64]*readpast.Job
}

func (h *advHeld) put(js []*readpast.Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, j := range js {
		// A claim with a short lease can reach here after its lease
		// expired, a rescue ran and another worker claimed the job again
		// and put it first: the later claim's token is the one that
		// holds the job, so an older one never replaces it.
		if old, ok := h.jobs[j.ID]; ok && old.StartedAt != nil && j.StartedAt != nil && old.StartedAt.After(*j.StartedAt) {
			continue
		}
		h.jobs[j.ID] = j
	}
}

func (h *advHeld) takeOne(r *rand.Rand) *readpast.Job {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.jobs) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(h.jobs))
	for id := range h.jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	id := ids[r.IntN(len(ids))]
	j := h.jobs[id]
	if r.IntN(10) != 0 { // sometimes keep it: a stale token later
		delete(h.jobs, id)
	}
	return j
}

func TestAdvKeysStressTwoStores(t *testing.T) { advStress(t, false) }

// TestAdvKeysStressLimitChurn is the stress with limits changing under
// the claims (PutLimit raise/lower, DeleteLimit, template changes,
// SetGroupLimit): counters must still match and every job finish.
func TestAdvKeysStressLimitChurn(t *testing.T) { advStress(t, true) }

func advStress(t *testing.T, churn bool) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "adv.db")
	var stores []*Store
	for i := 0; i < 2; i++ {
		s, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	s0 := stores[0]
	for k, n := range advLimits {
		l := readpast.Limit{Key: k, Concurrency: n}
		if k == "r" {
			l = readpast.Limit{Key: k, Rate: advRate, Per: advPer, Burst: advBurst}
		} else if strings.HasPrefix(k, "c:") {
			continue
		}
		keysPut(t, s0, l)
	}
	keysPut(t, s0, readpast.Limit{Key: "c:*", Concurrency: 2})

	var (
		held   = &advHeld{jobs: map[int64]*readpast.Job{}}
		startM sync.Mutex
		rStart []time.Time // starts of jobs naming r
		errM   sync.Mutex
		errs   []string
		wg     sync.WaitGroup
	)
	fail := func(f string, a ...any) {
		errM.Lock()
		errs = append(errs, fmt.Sprintf(f, a...))
		errM.Unlock()
	}
	record := func(js []*readpast.Job) {
		startM.Lock()
		defer startM.Unlock()
		for _, j := range js {
			if slices.Contains(j.Keys, "r") {
				rStart = append(rStart, *j.StartedAt)
			}
		}
	}
	deadline := time.Now().Add(6 * time.Second)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			s := stores[w%2]
			for time.Now().Before(deadline) {
				switch op := r.IntN(20); {
				case op < 3:
					n := 1 + r.IntN(4)
					ps := make([]readpast.EnqueueParams, n)
					for i := range ps {
						ps[i] = readpast.EnqueueParams{Kind: "k", Keys: advRandomKeys(r), Priority: r.IntN(3), MaxAttempts: 3}
						if r.IntN(10) == 0 {
							ps[i].RunAt = time.Now().Add(time.Duration(r.IntN(50)) * time.Millisecond)
						}
					}
					if _, err := s.Enqueue(ctx, ps); err != nil {
						fail("enqueue: %v", err)
					}
				case op < 8:
					lease := time.Minute
					if r.IntN(6) == 0 {
						lease = 20 * time.Millisecond
					}
					js, err := s.Claim(ctx, readpast.ClaimParams{Worker: fmt.Sprint("w", w), Limit: 1 + r.IntN(5), Lease: lease})
					if err != nil {
						fail("claim: %v", err)
						continue
					}
					record(js)
					held.put(js)
				case op < 11:
					if j := held.takeOne(r); j != nil {
						if _, err := s.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}}); err != nil {
							fail("complete: %v", err)
						}
					}
				case op < 12:
					if j := held.takeOne(r); j != nil {
						if _, err := s.Fail(ctx, []readpast.Failure{{ID: j.ID, Token: j.Token, Message: "x", Discard: r.IntN(3) == 0}}); err != nil {
							fail("fail: %v", err)
						}
					}
				case op < 13:
					if j := held.takeOne(r); j != nil {
						if err := s.Release(ctx, j.ID, j.Token); err != nil && !isEntryErr(err) {
							fail("release: %v", err)
						}
					}
				case op < 14:
					if j := held.takeOne(r); j != nil {
						if err := s.Snooze(ctx, j.ID, j.Token, time.Duration(1+r.IntN(20))*time.Millisecond); err != nil && !isEntryErr(err) {
							fail("snooze: %v", err)
						}
					}
				case op < 15:
					if j := held.takeOne(r); j != nil {
						if _, err := s.Cancel(ctx, j.ID); err != nil && !errors.Is(err, readpast.ErrInvalidState) && !isEntryErr(err) {
							fail("cancel: %v", err)
						}
					}
				case op < 16:
					if _, err := s.RescueExpired(ctx, 10); err != nil {
						fail("rescue: %v", err)
					}
				case op < 17:
					if r.IntN(10) == 0 {
						g := []string{"g0", "g1", "g2", "g3", "c:1", "c:2"}[r.IntN(6)]
						if _, err := s.BulkCancel(ctx, readpast.JobFilter{Group: g, State: readpast.StateRunning}); err != nil {
							fail("bulk cancel: %v", err)
						}
					}
				case op < 18:
					if _, err := s.PruneGroups(ctx, 100); err != nil {
						fail("prune groups: %v", err)
					}
				case op < 19:
					// BEGIN IMMEDIATE can meet SQLITE_BUSY while another
					// connection checkpoints, as the checker's read can
					// (advKeyCounts); the store's own writes retry it, and
					// so does this caller's transaction.
					tx, err := s.DB().BeginTx(ctx, nil)
					for retry := time.Now().Add(10 * time.Second); err != nil && IsUnavailable(err) && time.Now().Before(retry); {
						time.Sleep(5 * time.Millisecond)
						tx, err = s.DB().BeginTx(ctx, nil)
					}
					if err != nil {
						fail("begin: %v", err)
						continue
					}
					j := held.takeOne(r)
					if j == nil {
						tx.Rollback()
						continue
					}
					if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token}); err != nil && !isEntryErr(err) {
						fail("complete tx: %v", err)
					}
					if r.IntN(4) == 0 {
						tx.Rollback()
						held.put([]*readpast.Job{j})
					} else if err := tx.Commit(); err != nil {
						fail("commit: %v", err)
					}
				default:
					time.Sleep(time.Millisecond)
				}
			}
		}(w)
	}
	if churn {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(99, uint64(time.Now().UnixNano())))
			for time.Now().Before(deadline) {
				s := stores[r.IntN(2)]
				var err error
				switch r.IntN(5) {
				case 0:
					_, err = s.PutLimit(ctx, readpast.Limit{Key: []string{"a", "b", "g0", "g3"}[r.IntN(4)], Concurrency: 1 + r.IntN(3)})
				case 1:
					err = s.DeleteLimit(ctx, []string{"a", "b", "g0", "g3", "c:*"}[r.IntN(5)])
					if errors.Is(err, readpast.ErrLimitNotFound) {
						err = nil
					}
				case 2:
					_, err = s.PutLimit(ctx, readpast.Limit{Key: "c:*", Concurrency: 1 + r.IntN(3)})
				case 3:
					err = s.SetGroupLimit(ctx, []string{"g1", "g2", "a"}[r.IntN(3)], 1+r.IntN(3))
				case 4:
					_, err = s.PutLimit(ctx, readpast.Limit{Key: "g*", Concurrency: r.IntN(3), Weight: 2})
				}
				if err != nil {
					fail("limit churn: %v", err)
				}
				time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
			}
		}()
	}
	// A checker samples the invariants while the chaos runs.
	checks := 0
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if !advCheckCountsBound(t, stores[checks%2], fmt.Sprintf("check %d", checks), !churn) {
			break
		}
		checks++
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	advCheckCountsBound(t, s0, "after the chaos", !churn)
	if t.Failed() {
		t.FailNow()
	}

	// Rate: no span holds more starts of r than the rate allows.
	sort.Slice(rStart, func(i, j int) bool { return rStart[i].Before(rStart[j]) })
	for i := range rStart {
		for j := i; j < len(rStart); j++ {
			span := rStart[j].Sub(rStart[i])
			allowed := float64(advRate)*span.Seconds()/advPer.Seconds() + advBurst
			if float64(j-i+1) > allowed+1e-9 {
				t.Fatalf("key r started %d jobs within %v (allowed %.2f)", j-i+1, span, allowed)
			}
		}
	}

	// Drain: complete whatever is claimed; every job must finish. The
	// rate was checked above; lifting it lets the backlog naming r (its
	// size depends on the machine's speed) drain at once.
	keysPut(t, s0, readpast.Limit{Key: "r", Rate: 1_000_000, Per: advPer, Burst: 1_000_000})
	for _, j := range held.jobs {
		s0.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}})
	}
	idle := 0
	for i, end := 0, time.Now().Add(2*time.Minute); time.Now().Before(end) && idle < 60; i++ {
		s := stores[i%2]
		js, err := s.Claim(ctx, readpast.ClaimParams{Worker: "drain", Limit: 1 + i%5, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(js) == 0 {
			var left int
			if err := s.DB().QueryRow(`SELECT count(*) FROM readpast_jobs`).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left == 0 {
				break
			}
			s.RescueExpired(ctx, 100)
			idle++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		idle = 0
		cs := make([]readpast.Completion, len(js))
		for k, j := range js {
			cs[k] = readpast.Completion{ID: j.ID, Token: j.Token}
		}
		if _, err := stores[(i+1)%2].Complete(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	var left []string
	rws, err := s0.DB().Query(`SELECT id, state, coalesce(group_key, ''), coalesce(more_keys, ''), run_at, coalesce(lease_expires_at, 0), coalesce(worker, '') FROM readpast_jobs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rws.Next() {
		var (
			id, at, lease int64
			st, g, mk, wk string
		)
		rws.Scan(&id, &st, &g, &mk, &at, &lease, &wk)
		left = append(left, fmt.Sprintf("%d %s %s %s due-in %v lease-left %v worker %q", id, st, g, mk, time.Until(time.UnixMicro(at)), time.Until(time.UnixMicro(lease)), wk))
	}
	rws.Close()
	if len(left) > 0 {
		var marks, groups []string
		r2, _ := s0.DB().Query(`SELECT group_key, job_id, run_at FROM readpast_group_ready`)
		for r2.Next() {
			var g string
			var id, at int64
			r2.Scan(&g, &id, &at)
			marks = append(marks, fmt.Sprintf("%s/%d", g, id))
		}
		r2.Close()
		r3, _ := s0.DB().Query(`SELECT group_key, running, max_running, coalesce(waiters, '') FROM readpast_groups`)
		for r3.Next() {
			var g, w string
			var n, m int
			r3.Scan(&g, &n, &m, &w)
			groups = append(groups, fmt.Sprintf("%s %d/%d w=%s", g, n, m, w))
		}
		r3.Close()
		t.Fatalf("after the drain %d jobs never finished:\n%s\nmarks %v\nkeys %v", len(left), strings.Join(left, "\n"), marks, groups)
	}
	advCheckCountsBound(t, s0, "after the drain", !churn)
	wantNoKeyState(t, s0, "after the drain")
	t.Logf("%d checks, %d starts of r", checks, len(rStart))
}
