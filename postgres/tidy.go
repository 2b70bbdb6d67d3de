package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotOwner is what Tidy returns, once, when the store's role does not
// own the readpast tables and so cannot vacuum them.
var ErrNotOwner = errors.New("postgres: the store's role does not own the readpast tables, so it cannot vacuum them; autovacuum alone keeps them (see docs/design/claims.md, \"Dead rows\")")

// Tidy settings. Every claim and every finish leaves a dead row in the
// live jobs table, and its index entries stay at the head of the claim
// order until a vacuum removes them: each claim walks them all.
// PostgreSQL's autovacuum visits a table at most once a minute by default
// (autovacuum_naptime) whatever its thresholds, long enough for hundreds of
// thousands of dead rows to pile up in front of a few thousand live ones.
const (
	// tidyMinDead is the fewest dead rows worth a vacuum.
	tidyMinDead = 2000
	// tidyInterval is the least time between two vacuums of a table by
	// this store while they reclaim what they find.
	tidyInterval = 5 * time.Second
	// tidyMaxInterval caps the back-off when vacuums reclaim little,
	// because a transaction held open somewhere keeps the dead rows
	// visible to its snapshot: vacuuming then only costs.
	tidyMaxInterval = 5 * time.Minute
)

// tidyRule says when Tidy vacuums a table: once its dead rows number at
// least tidyMinDead and its live rows divided by per, at most once per
// interval while its vacuums reclaim what they find, and not within half
// an interval of the table's last vacuum by any process.
type tidyRule struct {
	per      int64
	interval time.Duration
}

// tidyRuleOf returns table's rule. A table is due once its dead rows
// outnumber its live ones, every 5 s at most: a vacuum reads the whole
// table, and the live jobs may be millions. The ready marks are the
// exception. Every claim of a queue with groups walks them from the head
// of the claim order, three times (the routine's check that picks its
// plan, the marks it locks, the mark it passed over), and deletes the
// marks it used, which are at that head: each claim between two vacuums
// walks more dead entries than the last. The table holds a row for each
// key whose next job is ready or waiting for tokens, and one for each
// grouped job not yet due, so it is due once its dead rows number an
// eighth of its live ones (a vacuum then reads at most nine rows for each
// dead one it removes), every second at most: in
// BenchmarkClaimGroupsAtScale (100,000 keys, 50,000 marks), claims of
// 100 jobs took 7% to 16% less time on average than with the marks
// under the general rule (docs/design/claims.md, "Dead rows").
func tidyRuleOf(table string) tidyRule {
	if table == "readpast_group_ready" {
		return tidyRule{per: 8, interval: time.Second}
	}
	return tidyRule{per: 1, interval: tidyInterval}
}

// due reports whether a table with dead and live rows is due a vacuum.
func (r tidyRule) due(dead, live int64) bool { return dead >= max(tidyMinDead, live/r.per) }

// tidier remembers, per table, when Tidy may vacuum it next.
type tidier struct {
	mu      sync.Mutex
	next    map[string]time.Time
	wait    map[string]time.Duration
	noOwner bool // this role may not vacuum the tables: Tidy does nothing
	// vacuumed, when set (by tests), is called after each vacuum, before
	// its outcome is judged.
	vacuumed func(table string)
}

// Tidy folds the count deltas into the counts (see Stats) and the
// freed-slot counts of keys into their rows, then vacuums
// the store's churning tables (live jobs, ready marks, group rows, count
// deltas, unique keys, freed-slot counts) whose dead rows outnumber their
// live ones (number an eighth of them, for the ready marks: tidyRuleOf),
// at most once per table every few seconds (every second for the marks),
// and returns how many it vacuumed. A table that another process (or
// autovacuum) vacuumed within half that interval is left to the next
// call: every process of a deployment runs Tidy, and each vacuum makes
// every server connection plan its statements on the table again. It
// implements readpast.Tidier; RunRescuer calls it. A vacuum never makes a
// claim or a write wait (it takes no lock they conflict with), and skips
// a table another vacuum is working on. When a vacuum leaves the table
// still due with more than half the dead rows it found (a transaction held
// open elsewhere keeps the rows visible), the table's next vacuum waits
// twice as long, up to five minutes. When the store's
// role does not own the tables, Tidy does nothing and says so once.
func (s *Store) Tidy(ctx context.Context) (int, error) {
	// The intervals count from the call's start: RunRescuer calls Tidy
	// once a second, and an interval of a second counted from the end of
	// the vacuum would let only every other call in.
	began := time.Now()
	if err := s.foldCounts(ctx); err != nil {
		return 0, err
	}
	if err := s.foldFreed(ctx); err != nil {
		return 0, err
	}
	t := &s.tidy
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.noOwner {
		return 0, nil
	}
	if t.next == nil {
		t.next, t.wait = map[string]time.Time{}, map[string]time.Duration{}
	}
	type table struct {
		name       string
		dead, live int64
	}
	rows, err := s.pool.Query(ctx, deadRowsSQL)
	if err != nil {
		return 0, opErr("tidy", err)
	}
	var due []table
	for rows.Next() {
		var (
			tb    table
			owner bool
			since *float64 // seconds since its last vacuum by anyone
		)
		if err := rows.Scan(&tb.name, &tb.dead, &tb.live, &owner, &since); err != nil {
			rows.Close()
			return 0, opErr("tidy", err)
		}
		if !owner {
			t.noOwner = true
			rows.Close()
			return 0, ErrNotOwner
		}
		rule := tidyRuleOf(tb.name)
		recent := since != nil && *since < rule.interval.Seconds()/2
		if rule.due(tb.dead, tb.live) && !began.Before(t.next[tb.name]) && !recent {
			due = append(due, tb)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, opErr("tidy", err)
	}
	done := 0
	for _, tb := range due {
		if _, err := s.pool.Exec(ctx, vacuumSQL[tb.name]); err != nil {
			return done, opErr("vacuum "+tb.name, err)
		}
		done++
		if t.vacuumed != nil {
			t.vacuumed(tb.name)
		}
		rule := tidyRuleOf(tb.name)
		wait := rule.interval
		if dead, live, err := s.deadRows(ctx, tb.name); err == nil && rule.due(dead, live) && 2*dead > tb.dead {
			// The vacuum left the table due, with more than half the
			// dead rows it found: they are still visible to some
			// snapshot. A busy table's rows keep dying while it is
			// vacuumed, and may leave it due again by the end, but then
			// the count has fallen by more than half; judged on what is
			// left alone, such a vacuum looked like one that reclaimed
			// nothing, the next waited 10 s, and a claim walked 300k
			// dead rows meanwhile (throughput fell from 30k to 4k jobs/s
			// in the batches scenario). Half, not less than found: the
			// count from before is the statistics', and a vacuum that
			// reclaims nothing reports what it found, which may differ.
			wait = min(max(2*t.wait[tb.name], rule.interval), tidyMaxInterval)
		}
		t.wait[tb.name] = wait
		t.next[tb.name] = began.Add(wait)
	}
	return done, nil
}

// deadRows returns the dead and live rows of table that the statistics
// report.
func (s *Store) deadRows(ctx context.Context, table string) (dead, live int64, err error) {
	rows, err := s.pool.Query(ctx, deadRowsSQL)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var d, l int64
		var owner bool
		var since *float64
		if err := rows.Scan(&name, &d, &l, &owner, &since); err != nil {
			return 0, 0, err
		}
		if name == table {
			return d, l, nil
		}
	}
	return 0, 0, rows.Err()
}

// foldBatch bounds one fold statement.
const foldBatch = 10000

// foldCounts folds every count delta written so far into the counts, in
// batches; Stats then reads fewer rows. Tidy calls it. Only one process
// folds at a time; the others' calls return at once.
func (s *Store) foldCounts(ctx context.Context) error {
	for {
		var n int
		if err := s.pool.QueryRow(ctx, foldCountsSQL, foldBatch).Scan(&n); err != nil {
			return opErr("fold counts", err)
		}
		if n < foldBatch {
			return nil
		}
	}
}

// freedBatch bounds the keys of one statement of foldFreed, and
// freedPasses its statements in one call.
const (
	freedBatch  = 1000
	freedPasses = 100
)

// foldFreed folds the freed-slot counts of keys (without a bound, or
// with room when their slots were freed) into their rows
// (fold_freed.sql), in batches of keys in key order, passing over the
// rows others hold; Tidy and PruneGroups call it. A key's running count
// is right either way (its row's less its counts); folded, the counts
// stop costing the readers that subtract them, an idle key's row can be
// pruned, and a bounded key whose row read full beside a count gets its
// slot back, the rows' trigger marking its next jobs (claims fold a
// bounded key's counts too, as they lock its row).
//
// One process folds at a time (a try-lock; the others' calls fold
// nothing), and each batch runs under a lock_timeout of lockWaitTimeout:
// PostgreSQL, locking a key row whose version a claim has just replaced,
// can wait for the transaction holding the newer version despite SKIP
// LOCKED, and the rows the fold holds meanwhile are rows claims pass
// over. A batch that meets such a wait ends it, undone, and the call
// folds no more: the counts wait for the next call.
func (s *Store) foldFreed(ctx context.Context) error {
	after := ""
	for range freedPasses {
		var last *string
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if err := setLockTimeout(ctx, tx, lockWaitTimeout); err != nil {
				return err
			}
			return tx.QueryRow(ctx, foldFreedSQL, freedBatch, after).Scan(&last)
		})
		if lockWaitEnded(err) {
			return nil
		}
		if err != nil {
			return opErr("fold freed slots", err)
		}
		if last == nil {
			return nil
		}
		after = *last
	}
	return nil
}
