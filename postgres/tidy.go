package postgres

import (
	"context"
	"errors"
	"sync"
	"time"
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
// freed-slot counts of keys without a bound into their rows, then vacuums
// the store's churning tables (live jobs, ready marks, group rows, count
// deltas, unique keys, freed-slot counts) whose dead rows outnumber their live ones, at most once per
// table every few seconds, and returns how many it vacuumed. It
// implements readpast.Tidier; RunRescuer calls it. A vacuum never makes a
// claim or a write wait (it takes no lock they conflict with), and skips
// a table another vacuum is working on. When a vacuum leaves the table
// still due with more than half the dead rows it found (a transaction held
// open elsewhere keeps the rows visible), the table's next vacuum waits
// twice as long, up to five minutes. When the store's
// role does not own the tables, Tidy does nothing and says so once.
func (s *Store) Tidy(ctx context.Context) (int, error) {
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
		var tb table
		var owner bool
		if err := rows.Scan(&tb.name, &tb.dead, &tb.live, &owner); err != nil {
			rows.Close()
			return 0, opErr("tidy", err)
		}
		if !owner {
			t.noOwner = true
			rows.Close()
			return 0, ErrNotOwner
		}
		if tb.dead >= max(tidyMinDead, tb.live) && !time.Now().Before(t.next[tb.name]) {
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
		wait := tidyInterval
		if dead, live, err := s.deadRows(ctx, tb.name); err == nil && dead >= max(tidyMinDead, live) && 2*dead > tb.dead {
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
			wait = min(max(2*t.wait[tb.name], tidyInterval), tidyMaxInterval)
		}
		t.wait[tb.name] = wait
		t.next[tb.name] = time.Now().Add(wait)
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
		if err := rows.Scan(&name, &d, &l, &owner); err != nil {
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

// foldFreed folds the freed-slot counts of keys without a bound into
// their rows (fold_freed.sql), in batches of keys in key order, passing
// over the rows others hold; Tidy and PruneGroups call it. A key's
// running count is right either way (its row's less its counts); folded,
// the counts stop costing the readers that subtract them, and an idle
// key's row can be pruned. No key's free slots change for a claim: a key
// with counts has no bound (a limit that gives it one folds its counts
// first).
func (s *Store) foldFreed(ctx context.Context) error {
	after := ""
	for range freedPasses {
		var last *string
		if err := s.pool.QueryRow(ctx, foldFreedSQL, freedBatch, after).Scan(&last); err != nil {
			return opErr("fold freed slots", err)
		}
		if last == nil {
			return nil
		}
		after = *last
	}
	return nil
}
