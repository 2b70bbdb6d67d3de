package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest/pgharness"
)

// TestClaimAfterAPositionSkipsTheWalk: with a snapshot held open, the
// index entries of claimed jobs stay at the head of the claim order, and a
// claim from the head reads every one of them; a claim from where the
// store starts it (100 ms of run_at before the last claimed job,
// postgres/claimfrom.go) reads at most that job's batch besides what it
// takes. It fails if the position is a filter rather than where the index
// scan starts.
func TestClaimAfterAPositionSkipsTheWalk(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := pgharness.Open(t, url)
	defer s.Close()
	const jobs, done, limit = 3000, 2000, 20
	held, last := finishUnderHeldSnapshot(ctx, t, s, url, jobs, done, time.Minute)
	defer held.Close(ctx)
	session, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	entriesRead := func() int64 { return indexEntriesRead(ctx, t, session, "readpast_jobs_claim") }
	fetched := func(from ...any) (int64, []int64) {
		t.Helper()
		before := entriesRead()
		tx, err := session.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids := callClaim(ctx, t, tx, "q", limit, from...)
		if err := tx.Rollback(ctx); err != nil { // the jobs stay pending for the next call
			t.Fatal(err)
		}
		return entriesRead() - before, ids
	}
	headReads, headIDs := fetched()
	// Where the store's claim starts: ClaimFromSlack before the last job
	// claimed. Its batch of 100 shares its run_at, so the claim reads the
	// entries of that batch's claimed jobs: at most 100 more than it takes.
	fromReads, fromIDs := fetched(postgres.ClaimStartArgs(last)...)
	t.Logf("a claim of %d from the head read %d entries of the claim index, from the position %d", limit, headReads, fromReads)
	if !slices.Equal(headIDs, fromIDs) || len(headIDs) != limit {
		t.Fatalf("from the head the claim took %v, after the position %v: want the same %d jobs", headIDs, fromIDs, limit)
	}
	if headReads < done {
		t.Fatalf("a claim from the head read %d index entries, fewer than the %d claimed jobs a held snapshot keeps: the test shows nothing", headReads, done)
	}
	if fromReads > limit+100 {
		t.Fatalf("a claim after the position read %d index entries for %d jobs: it walked the claimed jobs' entries", fromReads, limit)
	}
}

// TestClaimPositionAndWhatLiesAheadOfIt: a store's claims of one queue
// start after its last claimed job (postgres/claimfrom.go), so a job that
// another process puts ahead of that position waits for the next claim
// from the head (claimFrom.interval; set to an hour here); one within
// the slack before the position is taken at once; and whatever this store
// itself puts ahead (an enqueue, a release) is taken by its next claim.
func TestClaimPositionAndWhatLiesAheadOfIt(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	a := pgharness.Open(t, url) // the claimer
	defer a.Close()
	b := pgharness.Open(t, url) // another process
	defer b.Close()
	postgres.SetClaimFullEvery(a, time.Hour)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var ps []readpast.EnqueueParams
	for i := range 10 {
		at := t0.Add(time.Duration(i) * time.Second)
		ps = append(ps, readpast.EnqueueParams{Kind: "k", Queue: "q", RunAt: at})
	}
	queued, err := a.Enqueue(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(s *postgres.Store, n int) []int64 {
		t.Helper()
		got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"q"}, Worker: "w", Limit: n, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, j := range got {
			ids = append(ids, j.ID)
		}
		return ids
	}
	enqueue := func(s *postgres.Store, priority int, at time.Time) int64 {
		t.Helper()
		j, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "q", Priority: priority, RunAt: at}})
		if err != nil {
			t.Fatal(err)
		}
		return j[0].ID
	}
	want := func(what string, got []int64, ids ...int64) {
		t.Helper()
		if !slices.Equal(got, ids) {
			t.Fatalf("%s: claimed %v, want %v", what, got, ids)
		}
	}
	want("the first claim, from the head", claim(a, 3), queued[0].ID, queued[1].ID, queued[2].ID)

	// Ahead of the position, by another process: the next claim starts
	// after the position and does not see them.
	urgent := enqueue(b, -1, t0.Add(time.Hour))
	early := enqueue(b, 0, t0.Add(-time.Minute))
	want("a claim after the position", claim(a, 1), queued[3].ID)
	// Within the slack before the position (its run_at just before the
	// last claimed job's): taken at once, in claim order.
	near := enqueue(b, 0, queued[3].RunAt.Add(-postgres.ClaimFromSlack/2))
	want("a claim after the position, with a job within the slack", claim(a, 2), near, queued[4].ID)

	// The full claim comes within the interval and takes them in claim
	// order.
	postgres.SetClaimFullEvery(a, time.Millisecond)
	time.Sleep(2 * time.Millisecond)
	want("the full claim", claim(a, 3), urgent, early, queued[5].ID)

	// What this store puts ahead of its own position is seen at once.
	postgres.SetClaimFullEvery(a, time.Hour)
	want("a claim after the position", claim(a, 1), queued[6].ID)
	mine := enqueue(a, -1, t0.Add(time.Hour))
	want("after this store enqueued ahead of its position", claim(a, 1), mine)
	// Jobs 7 and 8 are a second apart: released, 7 lies ahead of the
	// position (8) by more than the slack.
	got, err := a.Claim(ctx, readpast.ClaimParams{Queues: []string{"q"}, Worker: "w", Limit: 2, Lease: time.Minute})
	if err != nil || len(got) != 2 || got[0].ID != queued[7].ID {
		t.Fatalf("claim: %v, %v; want jobs %d and %d", got, err, queued[7].ID, queued[8].ID)
	}
	if err := a.Release(ctx, got[0].ID, got[0].Token); err != nil {
		t.Fatal(err)
	}
	want("a claim after this store released a job", claim(a, 1), queued[7].ID)
}

// finishUnderHeldSnapshot enqueues jobs jobs of queue "q" on s, in batches
// of 100 whose run_at are a second apart (in the past), holds a snapshot
// open on url, then claims (with lease, 100 at a time) and completes done
// of them, so that the snapshot keeps their index entries. It returns the
// session holding the snapshot and the last job claimed.
func finishUnderHeldSnapshot(ctx context.Context, t *testing.T, s *postgres.Store, url string, jobs, done int, lease time.Duration) (*pgx.Conn, *readpast.Job) {
	t.Helper()
	t0 := time.Now().Add(-time.Hour)
	for base := 0; base < jobs; base += 100 {
		ps := make([]readpast.EnqueueParams, min(100, jobs-base))
		for i := range ps {
			ps[i] = readpast.EnqueueParams{Kind: "k", Queue: "q", RunAt: t0.Add(time.Duration(base/100) * time.Second)}
		}
		if _, err := s.Enqueue(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	held := holdSnapshot(ctx, t, url)
	var last *readpast.Job
	for n := 0; n < done; n += 100 {
		got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"q"}, Worker: "w", Limit: 100, Lease: lease})
		if err != nil || len(got) != 100 {
			held.Close(ctx)
			t.Fatalf("claim: %d jobs, %v", len(got), err)
		}
		completeAll(ctx, t, s, got)
		last = got[len(got)-1]
	}
	return held, last
}

// indexEntriesRead is how many entries of index the scans of all sessions
// have read, dead ones included (idx_tup_fetch counts live rows only),
// once session's own counts are flushed.
func indexEntriesRead(ctx context.Context, t *testing.T, session *pgx.Conn, index string) int64 {
	t.Helper()
	for _, q := range []string{"SELECT pg_stat_force_next_flush()", "SELECT pg_stat_clear_snapshot()"} {
		if _, err := session.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var n int64
	if err := session.QueryRow(ctx, "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = $1", index).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// holdSnapshot opens a session on url that holds a snapshot until closed,
// as a report or a session idle in transaction would.
func holdSnapshot(ctx context.Context, t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) FROM readpast_jobs"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			conn.Close(ctx)
			t.Fatal(err)
		}
	}
	return conn
}

// completeAll completes jobs, each with its own token.
func completeAll(ctx context.Context, t *testing.T, s *postgres.Store, jobs []*readpast.Job) {
	t.Helper()
	errs, err := s.Complete(ctx, completions(jobs))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		if e != nil {
			t.Fatal(e)
		}
	}
}

// TestFullClaimInterval: a full claim comes whenever 20 times as long as
// the last ones took has passed, up to 10 seconds, so that full claims
// cost at most about a twentieth of the claimer's time: in ordinary
// running, where a claim from the head takes a millisecond or two, within
// a few tens of milliseconds. A full lease-expiry scan comes at least
// every second, or on the same rule when that is longer.
func TestFullClaimInterval(t *testing.T) {
	for _, c := range []struct{ took, claim, rescue time.Duration }{
		{0, 0, time.Second},
		{time.Millisecond, 20 * time.Millisecond, time.Second},
		{10 * time.Millisecond, 200 * time.Millisecond, time.Second},
		{50 * time.Millisecond, time.Second, time.Second},
		{100 * time.Millisecond, 2 * time.Second, 2 * time.Second},
		{300 * time.Millisecond, 6 * time.Second, 6 * time.Second},
		{2 * time.Second, 10 * time.Second, 10 * time.Second},
	} {
		if got := postgres.ClaimInterval(c.took); got != c.claim {
			t.Errorf("full claims took %v: the next one within %v, want %v", c.took, got, c.claim)
		}
		if got := postgres.FullInterval(c.took); got != c.rescue {
			t.Errorf("full lease-expiry scans took %v: the next one within %v, want %v", c.took, got, c.rescue)
		}
	}
}

// TestRescueAfterAPositionSkipsTheWalk: with a snapshot held open, the lease
// index keeps an entry for every finished job, and the lease-expiry scan
// from the oldest lease reads all of those whose lease would have expired;
// after a position (the last complete scan's time, claimfrom.go) it reads
// none of them. It fails if the position is not where the scan starts.
func TestRescueAfterAPositionSkipsTheWalk(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := pgharness.Open(t, url)
	defer s.Close()
	const jobs = 2000
	held, _ := finishUnderHeldSnapshot(ctx, t, s, url, jobs, jobs, 100*time.Millisecond)
	defer held.Close(ctx)
	time.Sleep(200 * time.Millisecond) // the finished jobs' leases would have expired
	session, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	entriesRead := func() int64 { return indexEntriesRead(ctx, t, session, "readpast_jobs_lease") }
	scan := func(stmt string, args ...any) int64 {
		t.Helper()
		before := entriesRead()
		var n int
		var at time.Time
		if err := session.QueryRow(ctx, stmt, args...).Scan(&n, &at); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("the scan ended %d claims, want none: every job finished", n)
		}
		return entriesRead() - before
	}
	full := scan(postgres.RescueSQL, 100)
	from := scan(postgres.RescueFromSQL, 100, time.Now().Add(-50*time.Millisecond))
	t.Logf("a lease-expiry scan read %d entries of the lease index from the oldest, %d after a position", full, from)
	if full < jobs {
		t.Fatalf("the scan from the oldest lease read %d entries, fewer than the %d finished jobs a held snapshot keeps: the test shows nothing", full, jobs)
	}
	if from > 10 {
		t.Fatalf("the scan after the position read %d entries of the lease index: it walked the finished jobs' entries", from)
	}
}

// TestRescuePositionAndWhatLiesBeforeIt: a lease-expiry scan starts after
// the last complete scan's time less a second (claimfrom.go), so a job
// whose lease expired before that and which that scan could not end (its
// row was locked, and the locker left it running) is not seen by the next
// scans but is ended by the next full one.
func TestRescuePositionAndWhatLiesBeforeIt(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := pgharness.Open(t, url)
	defer s.Close()
	postgres.SetRescueFullEvery(s, time.Hour)
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{"q"}, Worker: "w", Limit: 1, Lease: 50 * time.Millisecond})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	time.Sleep(postgres.RescueFromSlack + 200*time.Millisecond)
	// Another transaction holds the row (a completion that will roll back).
	locker, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, "SELECT 1 FROM readpast_jobs WHERE id = $1 FOR UPDATE", got[0].ID); err != nil {
		t.Fatal(err)
	}
	rescue := func(what string, want int) {
		t.Helper()
		n, err := s.RescueExpired(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("%s: ended %d expired claims, want %d", what, n, want)
		}
	}
	rescue("the first scan, from the oldest lease, while the row is locked", 0)
	if err := locker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	rescue("a scan after the position", 0)
	postgres.SetRescueFullEvery(s, time.Millisecond)
	time.Sleep(2 * time.Millisecond)
	rescue("the next full scan", 1)
}
