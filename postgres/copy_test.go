package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// batch makes n jobs of queue q, every tenth with a tag.
func batch(n int, q string) []readpast.EnqueueParams {
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		ps[i] = readpast.EnqueueParams{Kind: "k", Queue: q, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		if i%10 == 0 {
			ps[i].Tags = []string{"tenth"}
		}
	}
	return ps
}

// TestLargeBatchAllOrNone: a large batch (written with COPY) with one job
// PostgreSQL refuses (a payload valid as JSON that jsonb rejects) fails
// whole: no job, no tag row, no count; a batch in the caller's
// transaction exists only once that commits, and its commit wakes a
// worker of another process.
func TestLargeBatchAllOrNone(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	n := postgres.CopyMinJobs * 2

	ps := batch(n, "q")
	ps[n-1].Payload = json.RawMessage(`{"s":"\u0000"}`)
	if _, err := s.Enqueue(ctx, ps); err == nil {
		t.Fatal("a batch with a payload jsonb refuses was accepted")
	}
	var jobs, tags int
	if err := s.Pool().QueryRow(ctx, "SELECT (SELECT count(*) FROM readpast_jobs), (SELECT count(*) FROM readpast_job_tags)").Scan(&jobs, &tags); err != nil {
		t.Fatal(err)
	}
	if jobs != 0 || tags != 0 || statsMap(t, s)["q/pending"] != 0 {
		t.Fatalf("a refused batch left %d jobs, %d tag rows, counts %v", jobs, tags, statsMap(t, s))
	}

	// In the caller's transaction: rolled back, nothing; committed, all,
	// and another process's worker hears of it.
	other, err := postgres.Open(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	wakes, err := other.Subscribe(sub)
	if err != nil {
		t.Fatal(err)
	}
	<-wakes // the LISTEN started
	for _, commit := range []bool{false, true} {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.EnqueueTx(ctx, tx, batch(n, "tx"))
		if err != nil || len(out) != n {
			t.Fatalf("EnqueueTx: %d jobs, %v", len(out), err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if commit {
			want = int64(n)
		}
		if got := statsMap(t, s)["tx/pending"]; got != want {
			t.Fatalf("commit %v: %d pending counted, want %d", commit, got, want)
		}
		if got := exactCounts(t, s)["tx/pending"]; got != want {
			t.Fatalf("commit %v: %d pending rows, want %d", commit, got, want)
		}
	}
	select {
	case <-wakes:
	case <-time.After(5 * time.Second):
		t.Fatal("the committed batch woke no worker of another process")
	}
	got, err := other.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: n + 1, Lease: time.Minute, Queues: []string{"tx"}})
	if err != nil || len(got) != n {
		t.Fatalf("the other process claimed %d, want %d (%v)", len(got), n, err)
	}
}

// TestLargeBatchesConcurrently: large batches from many goroutines and two
// store instances, large and small interleaved: every call's ids ascend in
// its order, and the counts match the rows exactly.
func TestLargeBatchesConcurrently(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	s2, err := postgres.Open(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := []*postgres.Store{s, s2}[g%2]
			for r := range 4 {
				n := postgres.CopyMinJobs + 37*g
				if r%2 == 1 {
					n = 1 + g
				}
				out, err := st.Enqueue(ctx, batch(n, fmt.Sprint("q", g%3)))
				if err != nil {
					errs <- err
					return
				}
				for i := 1; i < len(out); i++ {
					if out[i].ID <= out[i-1].ID {
						errs <- fmt.Errorf("goroutine %d: ids %d then %d", g, out[i-1].ID, out[i].ID)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, want := statsMap(t, s), exactCounts(t, s); !maps.Equal(got, want) {
		t.Fatalf("counts %v, rows %v", got, want)
	}
	var orphans int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM readpast_jobs j
		WHERE (tags IS NOT NULL) <> EXISTS (SELECT 1 FROM readpast_job_tags t WHERE t.job_id = j.id)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Fatalf("%d jobs whose tag rows do not match their tags", orphans)
	}
}
