package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// Batches: jobs that join a batch over time, and a finishing job that
// runs once the batch is sealed and every member has ended
// (docs/design/workflows.md, "Batches"). Each test skips on a store that
// keeps no batches; both stores do.

// batchStore makes a store for a batch test.
func batchStore(t *testing.T, h Harness) (readpast.Store, readpast.BatchStore) {
	t.Helper()
	s := newStore(t, h)
	bs, ok := s.(readpast.BatchStore)
	if !ok {
		t.Skipf("%T does not implement readpast.BatchStore", s)
	}
	return s, bs
}

// member is a job of kind "m" in queue q.
func member(q string) readpast.EnqueueParams {
	return readpast.EnqueueParams{Kind: "m", Queue: q}
}

// openBatch opens a batch whose finishing job is of kind "fin" in q.
func openBatch(t *testing.T, bs readpast.BatchStore, q string, onSuccess bool) *readpast.Job {
	t.Helper()
	fin := ok(bs.OpenBatch(ctxT(t), readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: q}, OnSuccess: onSuccess})).must(t)
	if fin.State != readpast.StateBlocked || fin.ID == 0 {
		t.Fatalf("OpenBatch returned %+v; want a blocked job", fin)
	}
	return fin
}

// wantBatch reads batch id and checks its counts and flags.
func wantBatch(t *testing.T, bs readpast.BatchStore, id int64, want readpast.Batch) readpast.Batch {
	t.Helper()
	b := ok(bs.Batch(ctxT(t), id)).must(t)
	got := readpast.Batch{ID: b.ID, OnSuccess: b.OnSuccess, Sealed: b.Sealed, Members: b.Members,
		Live: b.Live, Succeeded: b.Succeeded, Failed: b.Failed, Cancelled: b.Cancelled}
	want.ID = id
	if got != want || b.Finisher == nil || b.Finisher.ID != id {
		t.Fatalf("batch %d: %+v (finisher %+v); want %+v", id, got, b.Finisher, want)
	}
	return b
}

// testBatchRunsAfterMembers: members join in two calls; the finishing job
// waits for the seal and for every member, whatever their outcomes, and
// its batch counts them.
func testBatchRunsAfterMembers(t *testing.T, h Harness) {
	s, bs := batchStore(t, h)
	ctx := ctxT(t)
	fin := openBatch(t, bs, "q", false)
	a := ok(bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{member("q")})).must(t)
	grouped := member("q")
	grouped.Group = "g"
	grouped.MaxAttempts = 1
	b := ok(bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{grouped, member("q")})).must(t)
	if len(a) != 1 || len(b) != 2 || a[0].State != readpast.StatePending || b[0].State != readpast.StatePending {
		t.Fatalf("AddToBatch returned %+v and %+v; want pending members", a, b)
	}
	wantBatch(t, bs, fin.ID, readpast.Batch{Members: 3, Live: 3})
	wantCounts(t, s, "after the joins", map[readpast.JobState]int64{readpast.StateBlocked: 1, readpast.StatePending: 3})
	got := wantClaim(t, s, "the members", a[0], b[0], b[1])
	for _, j := range got {
		if j.ID != b[0].ID {
			mustComplete(t, s, j)
		} else if err := failOne(ctx, s, readpast.Failure{ID: j.ID, Token: j.Token, Message: "boom"}); err != nil {
			t.Fatal(err)
		}
	}
	wantClaim(t, s, "members ended, batch open", nil...)
	wantBatch(t, bs, fin.ID, readpast.Batch{Members: 3, Succeeded: 2, Failed: 1})
	sealed := ok(bs.SealBatch(ctx, fin.ID)).must(t)
	if !sealed.Sealed || sealed.Finisher.State != readpast.StatePending {
		t.Fatalf("SealBatch after the members ended: %+v, finisher %+v; want sealed, finisher pending", sealed, sealed.Finisher)
	}
	got = wantClaim(t, s, "after the seal", fin)
	mustComplete(t, s, got...)
	wantBatch(t, bs, fin.ID, readpast.Batch{Sealed: true, Members: 3, Succeeded: 2, Failed: 1})
	again := ok(bs.SealBatch(ctx, fin.ID)).must(t)
	if again.Finisher.State != readpast.StateSucceeded {
		t.Fatalf("sealing again: finisher %+v", again.Finisher)
	}
	// The members are the finishing job's parents; the seal is no job.
	if fi, isFlow := s.(readpast.FlowInspector); isFlow {
		parents, _, err := fi.Relatives(ctx, fin.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(parents) != 3 {
			t.Fatalf("the finishing job's parents: %d, want its 3 members", len(parents))
		}
		for _, p := range parents {
			if p.Job == nil || p.Job.Kind != "m" || p.Edge.Policy != readpast.RunAnyway {
				t.Fatalf("a parent of the finishing job: %+v", p)
			}
		}
		g := ok(fi.FlowGraph(ctx, fin.ID, 0)).must(t)
		if len(g.Jobs) != 4 || len(g.Edges) != 3 {
			t.Fatalf("the batch's graph: %d jobs, %d edges; want 4 and 3", len(g.Jobs), len(g.Edges))
		}
		res := ok(fi.ParentResults(ctx, []int64{fin.ID})).must(t)
		if len(res[fin.ID]) != 3 {
			t.Fatalf("the finishing job's parent results: %v, want its 3 members'", res)
		}
	}
}

// testBatchSealedFirst: sealed while members run, the batch releases its
// finishing job at the last member's end; an empty batch at its seal.
func testBatchSealedFirst(t *testing.T, h Harness) {
	s, bs := batchStore(t, h)
	ctx := ctxT(t)
	fin := openBatch(t, bs, "q", true)
	ms := ok(bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{member("q"), member("q")})).must(t)
	got := wantClaim(t, s, "the members", ms...)
	ok(bs.SealBatch(ctx, fin.ID)).must(t)
	wantBatch(t, bs, fin.ID, readpast.Batch{OnSuccess: true, Sealed: true, Members: 2, Live: 2})
	var closed *readpast.BatchClosedError
	if _, err := bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{member("q")}); !errors.As(err, &closed) || closed.ID != fin.ID || closed.State != "" || !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("AddToBatch after the seal: %v; want a *BatchClosedError (ErrInvalidState) for a sealed batch", err)
	}
	mustComplete(t, s, got[0])
	wantClaim(t, s, "one member left", nil...)
	mustComplete(t, s, got[1])
	mustComplete(t, s, wantClaim(t, s, "every member succeeded", fin)...)

	empty := openBatch(t, bs, "q", false)
	wantClaim(t, s, "an empty batch, open", nil...)
	ok(bs.SealBatch(ctx, empty.ID)).must(t)
	wantClaim(t, s, "an empty batch, sealed", empty)
	wantCounts(t, s, "at the end", map[readpast.JobState]int64{readpast.StateSucceeded: 3, readpast.StateRunning: 1})
}

// testBatchOnSuccess: a member that fails for good cancels an OnSuccess
// batch's finishing job at once, naming the member; nothing joins it
// after; its seal changes nothing.
func testBatchOnSuccess(t *testing.T, h Harness) {
	s, bs := batchStore(t, h)
	ctx := ctxT(t)
	fin := openBatch(t, bs, "q", true)
	m := member("q")
	m.MaxAttempts = 1
	ms := ok(bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{m, member("q")})).must(t)
	got := wantClaim(t, s, "the members", ms...)
	if got[0].ID != ms[0].ID {
		got[0], got[1] = got[1], got[0]
	}
	if err := failOne(ctx, s, readpast.Failure{ID: ms[0].ID, Token: got[0].Token, Message: "boom"}); err != nil {
		t.Fatal(err)
	}
	wantCancelledBy(t, s, fin.ID, ms[0].ID)
	if _, err := bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{member("q")}); !errors.Is(err, readpast.ErrInvalidState) {
		t.Fatalf("AddToBatch after the finishing job was cancelled: %v; want ErrInvalidState", err)
	}
	b := ok(bs.SealBatch(ctx, fin.ID)).must(t)
	if !b.Sealed || b.Finisher.State != readpast.StateCancelled || b.Failed != 1 || b.Live != 1 {
		t.Fatalf("sealing a cancelled batch: %+v", b)
	}
	mustComplete(t, s, got[1])
	wantClaim(t, s, "after every member ended", nil...)
	wantCounts(t, s, "at the end", map[readpast.JobState]int64{readpast.StateSucceeded: 1, readpast.StateFailed: 1, readpast.StateCancelled: 1})
}

// testBatchRefusals: bad joins and seals fail with the sentinel that
// explains them and store nothing.
func testBatchRefusals(t *testing.T, h Harness) {
	s, bs := batchStore(t, h)
	ctx := ctxT(t)
	plain := enqueue(t, s, member("q"))[0]
	fin := openBatch(t, bs, "q", false)
	unique := member("q")
	unique.UniqueKey = "u"
	cases := []struct {
		name string
		id   int64
		jobs []readpast.EnqueueParams
		want error
	}{
		{"unknown batch", fin.ID + 1000, []readpast.EnqueueParams{member("q")}, readpast.ErrNotFound},
		{"a job that is no batch", plain.ID, []readpast.EnqueueParams{member("q")}, readpast.ErrNotFound},
		{"a unique key", fin.ID, []readpast.EnqueueParams{member("q"), unique}, readpast.ErrInvalid},
		{"no jobs", fin.ID, nil, readpast.ErrInvalid},
		{"no kind", fin.ID, []readpast.EnqueueParams{{Queue: "q"}}, readpast.ErrInvalid},
	}
	for _, c := range cases {
		if _, err := bs.AddToBatch(ctx, c.id, c.jobs); !errors.Is(err, c.want) {
			t.Errorf("AddToBatch, %s: %v; want %v", c.name, err, c.want)
		}
	}
	var fe *readpast.FieldError
	if _, err := bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{member("q"), unique}); !errors.As(err, &fe) || fe.Field != "jobs[1].unique_key" {
		t.Errorf("AddToBatch with a unique key: %v; want a FieldError on jobs[1].unique_key", err)
	}
	if _, err := bs.OpenBatch(ctx, readpast.BatchParams{Finisher: unique}); !errors.As(err, &fe) || fe.Field != "finisher.unique_key" {
		t.Errorf("OpenBatch with a unique key: %v; want a FieldError on finisher.unique_key", err)
	}
	if _, err := bs.SealBatch(ctx, plain.ID); !errors.Is(err, readpast.ErrNotFound) {
		t.Errorf("SealBatch of a job that is no batch: %v; want ErrNotFound", err)
	}
	if _, err := bs.Batch(ctx, fin.ID+1000); !errors.Is(err, readpast.ErrNotFound) {
		t.Errorf("Batch of an unknown id: %v; want ErrNotFound", err)
	}
	wantBatch(t, bs, fin.ID, readpast.Batch{})
	wantCounts(t, s, "after the refusals", map[readpast.JobState]int64{readpast.StatePending: 1, readpast.StateBlocked: 1})
	// An operator's cancel of the finishing job closes the batch.
	ok(s.Cancel(ctx, fin.ID)).must(t)
	var closed *readpast.BatchClosedError
	if _, err := bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{member("q")}); !errors.As(err, &closed) || closed.State != readpast.StateCancelled {
		t.Errorf("AddToBatch to a cancelled batch: %v; want a *BatchClosedError naming the finishing job cancelled", err)
	}
	wantBatch(t, bs, fin.ID, readpast.Batch{Sealed: true})
}

// testBatchJoinsRaceTheSeal: goroutines join members one call at a time
// while another seals the batch: every join returns either members the
// finishing job waits for, or ErrInvalidState and nothing stored; the
// finishing job is claimable only once every member that joined has
// ended.
func testBatchJoinsRaceTheSeal(t *testing.T, h Harness) {
	s, bs := batchStore(t, h)
	ctx := ctxT(t)
	for round := range 3 {
		fin := openBatch(t, bs, fmt.Sprintf("q%d", round), false)
		var (
			mu     sync.Mutex
			joined []*readpast.Job
			wg     sync.WaitGroup
		)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					js, err := bs.AddToBatch(ctx, fin.ID, []readpast.EnqueueParams{member(fin.Queue), member(fin.Queue)})
					if errors.Is(err, readpast.ErrInvalidState) {
						return
					}
					if err != nil {
						t.Errorf("joiner %d: %v", g, err)
						return
					}
					mu.Lock()
					joined = append(joined, js...)
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(20+round*30) * time.Millisecond)
		ok(bs.SealBatch(ctx, fin.ID)).must(t)
		wg.Wait()
		b := wantBatch(t, bs, fin.ID, readpast.Batch{Sealed: true, Members: len(joined), Live: len(joined)})
		if b.Finisher.State != readpast.StateBlocked || len(joined) == 0 {
			t.Fatalf("round %d: %d joined, finisher %s", round, len(joined), b.Finisher.State)
		}
		left := len(joined)
		for left > 0 {
			got := claim(t, s, 7, time.Minute, fin.Queue)
			for _, j := range got {
				if j.ID == fin.ID {
					t.Fatalf("round %d: the finishing job was claimed with %d members not ended", round, left)
				}
			}
			if len(got) == 0 {
				t.Fatalf("round %d: %d members left, none claimable", round, left)
			}
			mustComplete(t, s, got...)
			left -= len(got)
		}
		wantClaim(t, s, "every member ended", fin)
	}
}
