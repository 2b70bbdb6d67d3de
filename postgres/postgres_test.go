package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/replay"
	"github.com/readpast/readpast/postgres"
)

func ids(jobs []*readpast.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// seed002 enqueues n jobs laid out as in seed 002: odd ids in groups "1"
// and "3" (id mod 4) when grouped, even ids ungrouped.
func seed002(t *testing.T, s *postgres.Store, grouped bool, n int) []*readpast.Job {
	t.Helper()
	ps := make([]readpast.EnqueueParams, n)
	for i := range ps {
		id := i + 1
		ps[i] = readpast.EnqueueParams{Kind: "work"}
		if grouped && id%2 == 1 {
			ps[i].Group = fmt.Sprint(id % 4)
		}
	}
	jobs, err := s.Enqueue(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// TestClaimNeverWaitsOnOpenTransaction is guarantee 2, the scenario of
// seed 002: claimer A runs the claim statement in a transaction it keeps
// open; claimer B must get a disjoint set at once, never blocking on A's
// locks, with and without concurrency groups. Enqueue must not wait either.
func TestClaimNeverWaitsOnOpenTransaction(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprint("grouped=", grouped), func(t *testing.T) {
			s := newStore(t)
			defer s.Close()
			ctx := context.Background()
			n := 12
			if grouped {
				n = 24
			}
			jobs := seed002(t, s, grouped, n)
			byID := map[int64]*readpast.Job{}
			for _, j := range jobs {
				byID[j.ID] = j
			}

			txA, err := s.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer txA.Rollback(ctx)
			heldA, err := postgres.ClaimTx(ctx, txA, readpast.ClaimParams{Worker: "A", Limit: 6, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(heldA) != 6 {
				t.Fatalf("A claimed %v, want 6 jobs", ids(heldA))
			}

			// B must not wait for A: a short deadline turns a wait into a failure.
			bctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			start := time.Now()
			gotB, err := s.Claim(bctx, readpast.ClaimParams{Worker: "B", Limit: 6, Lease: time.Minute})
			if err != nil {
				t.Fatalf("B's claim blocked behind A's open transaction: %v after %v", err, time.Since(start))
			}
			if len(gotB) == 0 {
				t.Fatal("B got nothing although unclaimed jobs were available")
			}
			held := map[int64]bool{}
			busy := map[string]bool{}
			for _, j := range heldA {
				held[j.ID] = true
				if j.Group != nil {
					busy[*j.Group] = true
				}
			}
			for _, j := range gotB {
				if held[j.ID] {
					t.Fatalf("job %d given to A and B", j.ID)
				}
				if j.Group != nil && busy[*j.Group] {
					t.Fatalf("B got job %d of group %s, which A is running", j.ID, *j.Group)
				}
			}
			want := []int64{jobs[6].ID, jobs[7].ID, jobs[8].ID, jobs[9].ID, jobs[10].ID, jobs[11].ID}
			if grouped {
				// A took 1 2 3 4 6 8 (5, 7, 9... wait for their groups). Its
				// statement also examined 10 and 12, the ungrouped candidates
				// the two group heads displaced; they stay locked while A's
				// transaction is open, so B skips them and takes the next
				// six ungrouped jobs without waiting.
				want = []int64{jobs[13].ID, jobs[15].ID, jobs[17].ID, jobs[19].ID, jobs[21].ID, jobs[23].ID}
			}
			if fmt.Sprint(ids(gotB)) != fmt.Sprint(want) {
				t.Fatalf("B claimed %v, want %v", ids(gotB), want)
			}

			// Enqueue into a group A holds, and a third claim, do not wait either.
			if _, err := s.Enqueue(bctx, []readpast.EnqueueParams{{Kind: "work", Group: "1"}}); err != nil {
				t.Fatalf("enqueue waited on A: %v", err)
			}
			if _, err := s.Claim(bctx, readpast.ClaimParams{Worker: "C", Limit: 6, Lease: time.Minute}); err != nil {
				t.Fatalf("C's claim waited on A: %v", err)
			}
			// A's transaction was open all along.
			if err := txA.QueryRow(ctx, "SELECT 1").Scan(new(int)); err != nil {
				t.Fatalf("A's transaction is no longer open: %v", err)
			}
		})
	}
}

func TestEnqueueTx(t *testing.T) {
	s := newStore(t)
	defer s.Close()
	ctx := context.Background()
	// A second store stands for another process, woken by NOTIFY.
	other, err := postgres.Open(ctx, s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	wake, err := other.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the listener to be in place (and for its first wake-up).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var listening int
		err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN readpast' AND datname = current_database()").Scan(&listening)
		if err == nil && listening == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listeners on this database: %d %v", listening, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)

	if _, err := s.Pool().Exec(ctx, "CREATE TABLE orders (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	var rolledBack int64
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES (1)"); err != nil {
			return err
		}
		jobs, err := s.EnqueueTx(ctx, tx, []readpast.EnqueueParams{{Kind: "ship", Payload: []byte(`{"order":1}`)}})
		if err != nil {
			return err
		}
		rolledBack = jobs[0].ID
		return errors.New("business rule failed")
	})
	if err == nil {
		t.Fatal("want the transaction to roll back")
	}
	if _, err := s.Get(ctx, rolledBack); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("job of a rolled-back transaction: %v", err)
	}
	replay.Drain(wake)
	var committed int64
	err = pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders VALUES (2)"); err != nil {
			return err
		}
		jobs, err := s.EnqueueTx(ctx, tx, []readpast.EnqueueParams{{Kind: "ship"}})
		if err == nil {
			committed = jobs[0].ID
			select {
			case <-wake:
				return errors.New("woken before commit")
			case <-time.After(100 * time.Millisecond):
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, committed); err != nil {
		t.Fatalf("job of a committed transaction: %v", err)
	}
	select {
	case <-wake:
	case <-time.After(2 * time.Second):
		t.Fatal("another process was not woken after the commit")
	}
}

func TestCompleteTx(t *testing.T) {
	s := newStore(t)
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, "CREATE TABLE effects (job bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatal(c, err)
	}
	j := c[0]
	work := func(commit bool) error {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO effects VALUES ($1)", j.ID); err != nil {
			return err
		}
		if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: j.ID, Token: j.Token, Result: []byte(`"ok"`)}); err != nil {
			return err
		}
		if commit {
			return tx.Commit(ctx)
		}
		return nil
	}
	if err := work(false); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Get(ctx, j.ID); g.State != readpast.StateRunning || g.Token != j.Token {
		t.Fatalf("rolled-back completion changed the job: %+v", g)
	}
	if err := work(true); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Get(ctx, j.ID); g.State != readpast.StateSucceeded {
		t.Fatalf("committed completion: state %s", g.State)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM effects").Scan(&n); err != nil || n != 1 {
		t.Fatalf("effects: %d %v", n, err)
	}
	// With the claim gone, a completion in a transaction is refused.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := s.CompleteTx(ctx, tx, readpast.Completion{ID: j.ID, Token: "00000000-0000-0000-0000-000000000000"}); !errors.Is(err, readpast.ErrStaleToken) {
		t.Fatalf("stale CompleteTx: %v", err)
	}
}

func TestDatabaseSQLTx(t *testing.T) {
	s := newStore(t)
	defer s.Close()
	ctx := context.Background()
	db, err := sql.Open("pgx", s.Pool().Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := s.EnqueueSQLTx(ctx, tx, []readpast.EnqueueParams{{Kind: "k", Group: "g", Payload: []byte(`{"a":[1,2]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, jobs[0].ID); !errors.Is(err, readpast.ErrNotFound) {
		t.Fatalf("visible before commit: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].ID != jobs[0].ID {
		t.Fatalf("claim: %v %v", c, err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteSQLTx(ctx, tx, readpast.Completion{ID: c[0].ID, Token: c[0].Token}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Get(ctx, c[0].ID); g.State != readpast.StateSucceeded {
		t.Fatalf("state %s", g.State)
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	if _, err := s.Pool().Exec(ctx, "INSERT INTO readpast_schema (version, name) VALUES (999, 'future')"); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); !errors.Is(err, readpast.ErrSchemaTooNew) {
		t.Fatalf("migrate a newer database: %v", err)
	}
	cur, latest, err := s.SchemaVersion(ctx)
	if err != nil || cur != 999 || latest >= 999 {
		t.Fatalf("schema version %d/%d %v", cur, latest, err)
	}
}

// TestPruneGroups: rows of idle keys are deleted, by PruneGroups and by
// the rescuer loop, whatever their limit; a key that runs something, one
// whose bucket is not full (a rate's starts still counting), and one that
// was served and has jobs waiting (its turn) are kept; a pruned key works
// as before, with its declared limit.
func TestPruneGroups(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	defer s.Close()
	if err := s.SetGroupLimit(ctx, "limited", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutLimit(ctx, readpast.Limit{Key: "paced", Rate: 1, Per: time.Hour, Burst: 5}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"limited", "idle1", "idle2", "busy", "paced"} {
		if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Group: g}, {Kind: "k", Group: g}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 100, Lease: time.Minute})
	if err != nil || len(got) != 7 { // limited and paced: 2, the others 1 each
		t.Fatal(len(got), err)
	}
	var cs []readpast.Completion
	for _, j := range got {
		if *j.Group != "busy" && *j.Group != "paced" {
			cs = append(cs, readpast.Completion{ID: j.ID, Token: j.Token})
		}
	}
	if _, err := s.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	rowsOf := func() map[string]int {
		t.Helper()
		rows, err := s.Pool().Query(ctx, "SELECT group_key, max_running FROM readpast_groups")
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
			k string
			m int
		}, error) {
			var v struct {
				k string
				m int
			}
			return v, r.Scan(&v.k, &v.m)
		})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, v := range out {
			m[v.k] = v.m
		}
		return m
	}
	if n, err := s.PruneGroups(ctx, 100); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v; want limited's row, the one idle key with no job waiting", n, err)
	}
	if m := rowsOf(); len(m) != 4 || m["paced"] == 0 || m["busy"] != 1 || m["idle1"] != 1 || m["idle2"] != 1 {
		t.Fatalf("rows left %v, want paced, busy, and idle1 and idle2 (served, with a job waiting)", m)
	}
	// A pruned key: its next jobs run under its limit as before.
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Group: "idle1"},
		{Kind: "k", Group: "limited"}, {Kind: "k", Group: "limited"}, {Kind: "k", Group: "limited"}, {Kind: "k", Group: "limited"}}); err != nil {
		t.Fatal(err)
	}
	again, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 100, Lease: time.Minute})
	// idle1: 1 of its 2; idle2: its second; limited: 3 of 4; busy: still
	// running.
	if err != nil || len(again) != 5 {
		t.Fatalf("after pruning claimed %d: %v", len(again), err)
	}
	checkGroups(t, s)
	if _, err := s.Complete(ctx, completions(again)); err != nil {
		t.Fatal(err)
	}
	// The rescuer loop prunes at its first tick: idle2's row (nothing
	// waits any more); idle1 and limited have a job waiting each.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go readpast.RunRescuer(rctx, s, time.Hour, slog.New(slog.DiscardHandler))
	deadline := time.Now().Add(5 * time.Second)
	pruned := func() bool {
		m := rowsOf()
		_, idle2 := m["idle2"]
		return !idle2 && len(m) == 4
	}
	for !pruned() {
		if time.Now().After(deadline) {
			t.Fatalf("the rescuer did not prune idle groups: %v", rowsOf())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.PruneGroups(ctx, 0); !errors.Is(err, readpast.ErrInvalid) {
		t.Fatalf("limit 0: %v", err)
	}
}

func completions(jobs []*readpast.Job) []readpast.Completion {
	cs := make([]readpast.Completion, len(jobs))
	for i, j := range jobs {
		cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
	}
	return cs
}
