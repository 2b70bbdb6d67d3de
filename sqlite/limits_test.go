package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// keyJobs returns n jobs of key in queue q.
func keyJobs(q, key string, n int) []readpast.EnqueueParams {
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Queue: q, Group: key}
	}
	return ps
}

// Two stores on one file (as two processes would be) claim one key's
// jobs and take its tokens at once: the starts and the tokens granted
// never exceed the burst, and the running jobs never exceed the
// concurrency. Each store decides from the rows its write transaction
// reads, and SQLite lets one write transaction run at a time on the file.
func TestTwoStoresShareOneKeysBucket(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "limits.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	for _, l := range []readpast.Limit{
		{Key: "rated", Rate: 1, Per: time.Hour, Burst: 3},
		{Key: "c:*", Concurrency: 2},
		{Key: "tokens", Rate: 1, Per: time.Hour, Burst: 5},
	} {
		if _, err := stores[0].PutLimit(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	ps := append(keyJobs("", "rated", 30), keyJobs("", "c:1", 30)...)
	if _, err := stores[1].Enqueue(ctx, ps); err != nil {
		t.Fatal(err)
	}
	var (
		claimed = map[string]int{}
		granted atomic.Int64
		mu      sync.Mutex
		wg      sync.WaitGroup
	)
	for i := range 8 {
		s := stores[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				jobs, err := s.Claim(ctx, readpast.ClaimParams{Worker: fmt.Sprint("w", i), Limit: 2, Lease: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, j := range jobs {
					claimed[*j.Group]++
				}
				mu.Unlock()
				g, err := s.TakeTokens(ctx, "tokens", 1)
				if err != nil {
					t.Error(err)
					return
				}
				if g.Granted {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if claimed["rated"] != 3 || claimed["c:1"] != 2 {
		t.Fatalf("claimed %v, want the burst of 3 of rated and the concurrency of 2 of c:1", claimed)
	}
	if n := granted.Load(); n != 5 {
		t.Fatalf("granted %d tokens, want the burst of 5", n)
	}
}

// A key a template governs, whose row went when its last running job
// finished (nothing running, no rate: a missing row), is marked in each
// queue among its first free jobs, free as its template says: a claimer
// of the second queue takes its job there. Marking only the first job,
// as for a key at the default limit, would leave it to a claim of the
// first queue.
func TestTemplateKeyMarkedInEveryQueueAfterItsRowWent(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "c:*", Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.Enqueue(ctx, append(keyJobs("a", "c:1", 3), keyJobs("b", "c:1", 1)...))
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"a"}, Worker: "w", Limit: 2, Lease: time.Minute})
	if err != nil || len(held) != 2 {
		t.Fatalf("claimed %d, %v; want 2", len(held), err)
	}
	// A row that has no turn to keep (as rows from before schema 9, which
	// recorded none) goes with its last running job, though jobs wait.
	if _, err := s.DB().Exec(`UPDATE readpast_groups SET served_at = NULL`); err != nil {
		t.Fatal(err)
	}
	cs := make([]readpast.Completion, len(held))
	for i, j := range held {
		cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
	}
	if res, err := s.Complete(ctx, cs); err != nil || res[0] != nil || res[1] != nil {
		t.Fatal(res, err)
	}
	var rows int
	if err := s.DB().QueryRow(`SELECT count(*) FROM readpast_groups`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d key rows (%v), want the idle key's row gone", rows, err)
	}
	got := claimIDs(t, s, 10, "b")
	if fmt.Sprint(got) != fmt.Sprint([]int64{jobs[3].ID}) {
		t.Fatalf("claim of b took %v, want %d (the key's second free slot)", got, jobs[3].ID)
	}
}

// A key's row stays while its bucket is not full, even with nothing
// running, and while a key that was served has jobs waiting (its turn);
// PruneGroups deletes it once neither holds (and rows TakeTokens
// created); a claim that creates the row again resolves its limit.
func TestPruneGroupsKeepsBucketsUntilFull(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if _, err := s.PruneGroups(ctx, 0); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("PruneGroups(0) = %v, want ErrInvalid", err)
	}
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "r:*", Rate: 1, Per: 300 * time.Millisecond, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, keyJobs("", "r:1", 2)); err != nil {
		t.Fatal(err)
	}
	held, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(held) != 1 {
		t.Fatalf("claimed %d, %v; want 1", len(held), err)
	}
	if res, err := s.Complete(ctx, []readpast.Completion{{ID: held[0].ID, Token: held[0].Token}}); err != nil || res[0] != nil {
		t.Fatal(res, err)
	}
	if g, err := s.TakeTokens(ctx, "free", 1); err != nil || !g.Granted {
		t.Fatal(g, err)
	}
	keys := func() string {
		t.Helper()
		var ks []string
		rows, err := s.DB().Query(`SELECT group_key FROM readpast_groups ORDER BY group_key`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			ks = append(ks, k)
		}
		return fmt.Sprint(ks)
	}
	if got := keys(); got != "[free r:1]" {
		t.Fatalf("key rows %s, want [free r:1]", got)
	}
	if n, err := s.PruneGroups(ctx, 100); err != nil || n != 1 || keys() != "[r:1]" {
		t.Fatalf("PruneGroups = %d, %v, left %s; want only free's row pruned", n, err, keys())
	}
	time.Sleep(350 * time.Millisecond)
	// r:1's bucket is full, but it was served and has a job waiting: its
	// row keeps the key's turn.
	if n, err := s.PruneGroups(ctx, 100); err != nil || n != 0 || keys() != "[r:1]" {
		t.Fatalf("PruneGroups with r:1's job waiting = %d, %v, left %s; want its row kept", n, err, keys())
	}
	held, err = s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(held) != 1 {
		t.Fatalf("claimed %d, %v; want 1", len(held), err)
	}
	if res, err := s.Complete(ctx, []readpast.Completion{{ID: held[0].ID, Token: held[0].Token}}); err != nil || res[0] != nil {
		t.Fatal(res, err)
	}
	time.Sleep(350 * time.Millisecond)
	if n, err := s.PruneGroups(ctx, 100); err != nil || n != 1 || keys() != "[]" {
		t.Fatalf("PruneGroups with r:1's bucket full and nothing waiting = %d, %v, left %s", n, err, keys())
	}
	if _, err := s.Enqueue(ctx, keyJobs("", "r:1", 2)); err != nil {
		t.Fatal(err)
	}
	held, err = s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(held) != 1 {
		t.Fatalf("claimed %d, %v; want 1", len(held), err)
	}
	info, err := s.GetLimit(ctx, "r:*")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Keys) != 1 || info.Keys[0].Key != "r:1" || info.Keys[0].Tokens != 0 || info.Keys[0].NextStart.IsZero() {
		t.Fatalf("keys of r:* %+v, want r:1 with its bucket empty", info.Keys)
	}
}

// A claim that leaves a key with a free slot out of tokens sets the
// store's alarm for the key's next start: subscribers are woken then,
// without a poll, and a claim takes the key's next job.
func TestKeyOutOfTokensWakesClaimersAtItsNextStart(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	const interval = 400 * time.Millisecond
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "k", Rate: 1, Per: interval, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, keyJobs("", "k", 2)); err != nil {
		t.Fatal(err)
	}
	first, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(first) != 1 {
		t.Fatalf("claimed %d, %v; want 1", len(first), err)
	}
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.Subscribe(sub)
	if err != nil {
		t.Fatal(err)
	}
	next := first[0].StartedAt.Add(interval)
	select {
	case <-ch:
		if early := time.Until(next); early > 50*time.Millisecond {
			t.Fatalf("woken %s before the key's next start", early)
		}
	case <-time.After(time.Until(next) + time.Second):
		t.Fatal("not woken at the key's next start")
	}
	again := claimIDs(t, s, 10)
	if len(again) != 1 {
		t.Fatalf("claimed %v at the key's next start, want its second job", again)
	}
}

// A database at schema version 7 with group limits set (rows with
// max_running other than 1) gets migration 8 on Open: each such row's
// limit becomes the declared limit of its key.
func TestMigrateGroupLimitsToLimits(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	path := s.Path()
	for _, q := range []string{
		`DROP TRIGGER readpast_jobs_released`, // schema 13, applied again
		`DROP TRIGGER readpast_jobs_child_gone`,
		`DROP TRIGGER readpast_jobs_resolve_edges`,
		`ALTER TABLE readpast_jobs DROP COLUMN more_keys`, // schema 18, applied again
		`ALTER TABLE readpast_history DROP COLUMN more_keys`,
		`ALTER TABLE readpast_groups DROP COLUMN waiters`,
		`DROP TABLE readpast_edges`,
		`ALTER TABLE readpast_jobs DROP COLUMN has_children`,
		`ALTER TABLE readpast_jobs DROP COLUMN waiting_on`,
		`ALTER TABLE readpast_jobs DROP COLUMN traceparent`, // schema 12, applied again
		`ALTER TABLE readpast_jobs DROP COLUMN tracestate`,
		`ALTER TABLE readpast_groups DROP COLUMN turn_used`, // schema 17, applied again
		`ALTER TABLE readpast_groups DROP COLUMN weight`,
		`ALTER TABLE readpast_groups DROP COLUMN served_at`,
		`DROP TABLE readpast_limits`,
		`DROP INDEX readpast_groups_limit`,
		`ALTER TABLE readpast_groups DROP COLUMN limit_key`,
		`ALTER TABLE readpast_groups DROP COLUMN interval_us`,
		`ALTER TABLE readpast_groups DROP COLUMN burst`,
		`ALTER TABLE readpast_groups DROP COLUMN tat`,
		`DELETE FROM readpast_schema_migrations WHERE version > 7`,
		`INSERT INTO readpast_groups (group_key, running, max_running) VALUES ('G', 0, 3), ('D', 1, 1), ('H', 2, 10000)`,
	} {
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ls, err := s2.ListLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{{G 3 0 0s 0 1} [{G G 0 3 -1 0001-01-01 00:00:00 +0000 UTC}]} {{H 10000 0 0s 0 1} [{H H 2 10000 -1 0001-01-01 00:00:00 +0000 UTC}]}]`
	if got := fmt.Sprint(ls); got != want {
		t.Fatalf("limits after migration 8:\n%s\nwant\n%s", got, want)
	}
	// SetGroupLimit keeps the rate PutLimit gave.
	if _, err := s2.PutLimit(ctx, readpast.Limit{Key: "G", Concurrency: 3, Rate: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s2.SetGroupLimit(ctx, "G", 4); err != nil {
		t.Fatal(err)
	}
	got, err := s2.GetLimit(ctx, "G")
	if err != nil {
		t.Fatal(err)
	}
	if want := (readpast.Limit{Key: "G", Concurrency: 4, Rate: 5, Per: time.Second, Burst: 5, Weight: 1}); got.Limit != want {
		t.Fatalf("after SetGroupLimit: %+v, want %+v", got.Limit, want)
	}
}
