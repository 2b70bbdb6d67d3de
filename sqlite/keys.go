package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/readpast/readpast/internal/storekit"
)

// Jobs with several keys (docs/design/flow-control.md, "Jobs with several
// keys"; migrations/0018_job_keys.sql). A job's first key is its group
// (group_key): its stream, its turn, its ready marks, as before. Its
// other keys (more_keys, a JSON array) only constrain it: a claim takes
// it only when every key it names has a free slot and a token, and it
// then counts as running on each and spends a token of each; every
// finisher frees a slot of each.
//
// A claim that leaves a job because a later key is full gives its first
// key no ready mark for it (marking it would make every claim read it
// again, in vain, until the key frees a slot): the first key is kept
// among the full key's waiters instead, and whatever frees a slot of
// that key, or changes its limit, marks it again at its first due jobs.
// A job left because a later key is out of tokens marks its first key at
// that key's next start, as a first key out of tokens is marked.
//
// Jobs with one key or none take none of these paths: a claim fits
// candidates to their later keys only when one of them has any, and a
// finisher reads a later key only from a job that names one.

const (
	// addWaitersSQL adds to each key row that ?1 (a JSON array of [key,
	// waiter]) names its waiters, each once.
	addWaitersSQL = `UPDATE readpast_groups SET waiters = (
    SELECT json_group_array(w) FROM (
        SELECT value AS w FROM json_each(coalesce(readpast_groups.waiters, '[]'))
        UNION
        SELECT p.value ->> 1 FROM json_each(?1) AS p WHERE p.value ->> 0 = readpast_groups.group_key))
WHERE group_key IN (SELECT value ->> 0 FROM json_each(?1))`
	// clearWaitersSQL forgets the waiters of the keys in ?1 (a JSON
	// array), which the caller marks.
	clearWaitersSQL = `UPDATE readpast_groups SET waiters = NULL WHERE group_key IN (SELECT value FROM json_each(?1))`
)

// moreKeysValue is the more_keys column of a job with keys (normalized:
// the first is its group): a JSON array of the keys after the first, NULL
// for one key or none.
func moreKeysValue(keys []string) (any, error) {
	if len(keys) < 2 {
		return nil, nil
	}
	b, err := json.Marshal(keys[1:])
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// parseMoreKeys reads a more_keys column: nil for NULL.
func parseMoreKeys(col sql.NullString) ([]string, error) {
	if !col.Valid || col.String == "" {
		return nil, nil
	}
	var keys []string
	if err := json.Unmarshal([]byte(col.String), &keys); err != nil {
		return nil, fmt.Errorf("decode more_keys column: %w", err)
	}
	return keys, nil
}

// jobKeys is readpast.Job.Keys of a row: its group, then its more_keys;
// nil for a job without a group.
func jobKeys(group, more sql.NullString) ([]string, error) {
	if !group.Valid {
		return nil, nil
	}
	rest, err := parseMoreKeys(more)
	if err != nil {
		return nil, err
	}
	return append([]string{group.String}, rest...), nil
}

// freeJobKeys counts in freed (key -> jobs that stopped running) a slot
// of every key of a job that stopped running: its group, and each of its
// more_keys.
func freeJobKeys(freed map[string]int, group, more sql.NullString) error {
	if !group.Valid {
		return nil
	}
	freed[group.String]++
	rest, err := parseMoreKeys(more)
	if err != nil {
		return err
	}
	for _, k := range rest {
		freed[k]++
	}
	return nil
}

// keyBudget is what one claim has left of a key: its free slots and its
// bucket after the jobs the claim took so far, and how many of those
// named it first and after the first.
type keyBudget struct {
	state  keyState        // its row as the claim read it, or the limit a missing row gets
	slots  int             // free slots left
	bucket storekit.Bucket // its bucket after the starts taken so far
	first  int             // jobs taken whose first key it is
	later  int             // jobs taken that name it after the first
}

// newBudget is the whole of key state k.
func newBudget(k keyState) *keyBudget {
	return &keyBudget{state: k, slots: k.free(), bucket: k.bucket}
}

// fits reports whether the key allows one more start at now.
func (b *keyBudget) fits(now time.Time) bool {
	return b.slots > 0 && b.bucket.Tokens(now) != 0
}

// take uses one slot and one token (if the key has a rate) of the key.
func (b *keyBudget) take(now time.Time) {
	b.slots--
	b.bucket.Take(now, 1)
}

// hold is why a claim left a candidate: its later keys.
type hold struct {
	full []string // those that had no free slot
	next int64    // when those out of tokens (with a slot) next allow a start, Unix µs; 0 for none
}

// keyFit is the fit of one claim's candidates to the budgets of every key
// they name (claimIn uses it when a head it read has later keys; nil
// otherwise).
type keyFit struct {
	budgets map[string]*keyBudget
	held    map[int64]hold // candidates held back by a later key, by id
	later   []string       // the keys named only after the first (no look of the claim's)
}

// newKeyFit reads the budgets of every key a claim's candidates may name:
// the keys it looked at (looks), and the later keys of their heads in
// queues, read here (or resolved, for keys without a row).
func newKeyFit(ctx context.Context, tx *sql.Tx, looks []groupLook, queues []string) (*keyFit, error) {
	f := &keyFit{budgets: make(map[string]*keyBudget, len(looks)), held: map[int64]hold{}}
	for _, g := range looks {
		f.budgets[g.name] = newBudget(g.key)
	}
	for _, g := range looks {
		for _, h := range g.heads {
			if !slices.Contains(queues, h.queue) {
				continue
			}
			for _, k := range h.more {
				if _, ok := f.budgets[k]; !ok && !slices.Contains(f.later, k) {
					f.later = append(f.later, k)
				}
			}
		}
	}
	states, err := readKeys(ctx, tx, f.later)
	if err != nil {
		return nil, err
	}
	for i, k := range f.later {
		f.budgets[k] = newBudget(states[i])
	}
	return f, nil
}

// fullNow reports whether a later key of c has no free slot left: before
// the claim takes anything, a head the claim cannot take, which counts in
// no round of its key (claimIn).
func (f *keyFit) fullNow(c candidate) bool {
	if f == nil {
		return false
	}
	return slices.ContainsFunc(c.more, func(k string) bool { return f.budgets[k].slots <= 0 })
}

// take takes from cands, in claim order, up to limit candidates whose
// every key allows a start, each using a slot and a token of every key
// it names: a key's budget is shared by its own jobs and the jobs naming
// it after the first alike. A candidate a later key holds back is
// recorded with why; one its first key holds back (its slots or tokens
// spent by jobs before it that name the key later) is left as a first
// key's job past its takes is.
func (f *keyFit) take(cands []candidate, limit int, now time.Time) []candidate {
	out := make([]candidate, 0, min(len(cands), limit))
	for _, c := range cands {
		if len(out) == limit {
			break
		}
		if c.group == "" {
			out = append(out, c)
			continue
		}
		var h hold
		for _, k := range c.more {
			switch b := f.budgets[k]; {
			case b.slots <= 0:
				h.full = append(h.full, k)
			case b.bucket.Tokens(now) == 0:
				h.next = max(h.next, micros(b.bucket.NextStart(now)))
			}
		}
		if len(h.full) > 0 || h.next > 0 {
			f.held[c.id] = h
			continue
		}
		first := f.budgets[c.group]
		if !first.fits(now) {
			continue
		}
		first.take(now)
		first.first++
		for _, k := range c.more {
			b := f.budgets[k]
			b.take(now)
			b.later++
		}
		out = append(out, c)
	}
	return out
}

// laterUses is how many jobs the claim took that name key after the
// first; 0 without a fit.
func (f *keyFit) laterUses(key string) int {
	if f == nil {
		return 0
	}
	if b, ok := f.budgets[key]; ok {
		return b.later
	}
	return 0
}

// fullHeld reports whether a full later key held back candidate id.
func (f *keyFit) fullHeld(id int64) bool {
	return f != nil && len(f.held[id].full) > 0
}

// heldUntil is when the later keys out of tokens that held back
// candidate id next allow a start (Unix µs); 0 for none.
func (f *keyFit) heldUntil(id int64) int64 {
	if f == nil {
		return 0
	}
	return f.held[id].next
}

// saveLater counts, on the rows of the keys the claim's jobs name only
// after the first (created when missing, with the limit that governs
// them), the jobs it took: running, and a token each. Their turns stay:
// a later key is a constraint, not a stream.
func (f *keyFit) saveLater(ctx context.Context, tx *sql.Tx, now time.Time) error {
	if f == nil {
		return nil
	}
	for _, k := range f.later {
		if b := f.budgets[k]; b.later > 0 {
			if _, _, err := takeKey(ctx, tx, k, b.state, 0, b.later, now); err != nil {
				return fmt.Errorf("take later key slots: %w", err)
			}
		}
	}
	return nil
}

// waitsOn returns [full key, first key g] for each full later key that
// held back a head of g the claim did not take: g waits for each.
func (f *keyFit) waitsOn(g groupLook, picked map[int64]bool) [][2]string {
	if f == nil {
		return nil
	}
	var out [][2]string
	for _, h := range g.heads {
		if picked[h.id] {
			continue
		}
		for _, k := range f.held[h.id].full {
			if p := [2]string{k, g.name}; !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// addWaiters keeps each pair's first key among the waiters of its full
// key, whose row exists (it has running jobs).
func addWaiters(ctx context.Context, tx *sql.Tx, pairs [][2]string) error {
	if len(pairs) == 0 {
		return nil
	}
	js, err := json.Marshal(pairs)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, addWaitersSQL, string(js))
	return err
}

// waiterList gathers the waiters of key rows (a row's waiters column,
// read as a statement that frees a slot of the key or changes its limit
// returns it), to forget and to mark: the keys whose rows had some, and
// the waiters, each once.
type waiterList struct {
	keys    []string
	waiters []string
}

// add reads key's waiters column.
func (w *waiterList) add(key string, col sql.NullString) error {
	ws, err := parseMoreKeys(col) // a JSON array of names too
	if err != nil {
		return fmt.Errorf("key %q: waiters: %w", key, err)
	}
	if len(ws) == 0 {
		return nil
	}
	w.keys = append(w.keys, key)
	for _, k := range ws {
		if !slices.Contains(w.waiters, k) {
			w.waiters = append(w.waiters, k)
		}
	}
	return nil
}

// take forgets the waiters gathered, on their keys' rows, and returns
// them, sorted: the caller marks them.
func (w *waiterList) take(ctx context.Context, tx *sql.Tx) ([]string, error) {
	if len(w.keys) == 0 {
		return nil, nil
	}
	js, err := json.Marshal(w.keys)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, clearWaitersSQL, string(js)); err != nil {
		return nil, err
	}
	slices.Sort(w.waiters)
	return w.waiters, nil
}

// withWaiters returns keys followed by the waiters not among them.
func withWaiters(keys, waiters []string) []string {
	for _, w := range waiters {
		if !slices.Contains(keys, w) {
			keys = append(keys, w)
		}
	}
	return keys
}
