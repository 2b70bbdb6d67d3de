package sqlite_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// TestTxWritesWakeAfterTheTransaction: a write made inside the caller's
// transaction (EnqueueSQLTx, EnqueueFlowSQLTx, AddToBatchSQLTx, and a
// CompleteSQLTx that frees a group slot or releases a child) wakes the
// claimers only once that transaction has ended. The test replays the
// window between the write and the commit: a claimer woken in it claims
// at once, as a worker does, and its claim cannot see the uncommitted
// job. After the commit a wake-up must come, and the claim it starts
// must get the job; a store that woke its claimers before the commit
// (and not again) leaves the job to the next poll.
func TestTxWritesWakeAfterTheTransaction(t *testing.T) {
	type write func(ctx context.Context, t *testing.T, s *sqlite.Store, tx *sql.Tx)
	cases := []struct {
		name  string
		setup func(ctx context.Context, t *testing.T, s *sqlite.Store) write
	}{
		{"EnqueueSQLTx", func(context.Context, *testing.T, *sqlite.Store) write {
			return func(ctx context.Context, t *testing.T, s *sqlite.Store, tx *sql.Tx) {
				if _, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"EnqueueFlowSQLTx", func(context.Context, *testing.T, *sqlite.Store) write {
			return func(ctx context.Context, t *testing.T, s *sqlite.Store, tx *sql.Tx) {
				if _, err := s.EnqueueFlowSQLTx(ctx, tx, []readpast.FlowJob{{Ref: "a", Job: readpast.EnqueueParams{Kind: "k"}}}); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"AddToBatchSQLTx", func(ctx context.Context, t *testing.T, s *sqlite.Store) write {
			b, err := s.OpenBatch(ctx, readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "fin", Queue: "fin"}})
			if err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context, t *testing.T, s *sqlite.Store, tx *sql.Tx) {
				if _, err := s.AddToBatchSQLTx(ctx, tx, b.ID, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"CompleteSQLTx frees a slot", func(ctx context.Context, t *testing.T, s *sqlite.Store) write {
			if err := s.SetGroupLimit(ctx, "g", 1); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "a", Queue: "first", Group: "g"}}); err != nil {
				t.Fatal(err)
			}
			a := claimOne(ctx, t, s, "first")
			if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "b", Group: "g"}}); err != nil {
				t.Fatal(err)
			}
			return func(ctx context.Context, t *testing.T, s *sqlite.Store, tx *sql.Tx) {
				if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: a.ID, Token: a.Token}); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"CompleteSQLTx releases a child", func(ctx context.Context, t *testing.T, s *sqlite.Store) write {
			if _, err := s.EnqueueFlow(ctx, []readpast.FlowJob{
				{Ref: "p", Job: readpast.EnqueueParams{Kind: "p", Queue: "first"}},
				{Ref: "c", Job: readpast.EnqueueParams{Kind: "c"}, After: []readpast.After{{Ref: "p"}}},
			}); err != nil {
				t.Fatal(err)
			}
			p := claimOne(ctx, t, s, "first")
			return func(ctx context.Context, t *testing.T, s *sqlite.Store, tx *sql.Tx) {
				if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: p.ID, Token: p.Token}); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := openTemp(t)
			w := c.setup(ctx, t, s)
			ch, err := s.Subscribe(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			w(ctx, t, s, tx)
			var early chan []*readpast.Job
			select {
			case <-ch: // woken before the commit: claim now, as a worker would
				early = make(chan []*readpast.Job, 1)
				go func() { early <- claimDefault(ctx, s) }()
				// Its probe returns at once, having seen nothing; a claim
				// that goes on to the write lock waits for the commit.
				select {
				case <-early:
					early = nil
				case <-time.After(500 * time.Millisecond):
				}
			default:
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if early != nil && len(<-early) == 1 {
				return // the woken claim waited for the commit and got the job
			}
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				t.Fatal("no wake-up after the commit: the job waits for the next poll")
			}
			if got := claimDefault(ctx, s); len(got) != 1 {
				t.Fatalf("the claim woken after the commit got %d jobs, want 1", len(got))
			}
		})
	}
}

// claimOne claims the one job of queue, failing t otherwise.
func claimOne(ctx context.Context, t *testing.T, s *sqlite.Store, queue string) *readpast.Job {
	t.Helper()
	got, err := s.Claim(ctx, readpast.ClaimParams{Queues: []string{queue}, Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim from %s: %v, %v", queue, got, err)
	}
	return got[0]
}

// claimDefault claims up to 10 jobs of the default queue; nil on an
// error, which the caller's count then reports.
func claimDefault(ctx context.Context, s *sqlite.Store) []*readpast.Job {
	got, _ := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
	return got
}
