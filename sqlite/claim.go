package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/readpast/readpast"
)

// Claim takes up to p.Limit pending jobs whose run_at has come, in order of
// priority, run_at, id across p.Queues, in one write transaction, all
// under one fresh token with a lease of p.Lease. Ungrouped jobs are always
// claimable; a concurrency group gives only its first due jobs across all
// queues (a group is one ordered stream: its head in a queue this claim
// does not take holds the rest back), as many as it has free slots. Groups
// are found through their ready marks (migrations/0003_ready_marks.sql),
// so full and idle groups cost a claim nothing. A job with several keys
// is taken only when every one of them has a free slot and a token, the
// claim's jobs sharing each key's (keys.go); its group, its first key, is
// its stream.
//
// Claimers serialize on SQLite's write lock; an idle poller does not take
// it (a read-only probe finds nothing to look at first). A claim's outcome
// is never in doubt: an error means its transaction rolled back.
func (s *Store) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, err
	}
	queues := uniq(p.Queues)
	qjs, err := json.Marshal(queues)
	if err != nil {
		return nil, err
	}
	var something bool
	if err := s.readOp(ctx, "claim probe", func(db *sql.DB) error {
		return db.QueryRowContext(ctx, claimProbeSQL, string(qjs), micros(s.now())).Scan(&something)
	}); err != nil {
		return nil, err
	}
	if !something {
		return []*readpast.Job{}, nil
	}
	token := uuid.NewString()
	var (
		out   []*readpast.Job
		freed bool
		next  []time.Time
	)
	err = s.writeTx(ctx, "claim", func(tx *sql.Tx) error {
		var err error
		out, freed, next, err = claimIn(ctx, tx, p, queues, s.now(), token)
		return err
	})
	if err != nil {
		return nil, err
	}
	// A group this claim looked at has more to give now (freed), or a key
	// out of tokens can start a job at a time in next.
	s.announce(wakeup{now: freed, later: next})
	return out, nil
}

// uniq drops repeated names, keeping the first.
func uniq(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// candidate is a pending job a claim may take.
type candidate struct {
	id, runAt int64
	turn      int64 // its place in claim order: run_at, or later for a key served since
	round     int   // a keyed job's place among its key's heads the claim may take, from 0, divided by its weight; 0 for an ungrouped job
	priority  int
	queue     string
	group     string   // "" for an ungrouped job
	more      []string // its keys after the first (more_keys); nil for one key or none
}

// claimOrder orders candidates by priority, round, turn, run_at, id. A
// keyed job's turn is the later of its run_at and the last time a claim
// took jobs of its key, so keys take turns within a priority, and its round
// is its place among the heads of its key this claim read divided by the
// key's weight, so one claim takes up to weight jobs of each key it reads
// before more of any. Along a key's stream neither goes back, so any cut
// is a prefix of it.
func claimOrder(a, b candidate) int {
	return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.round, b.round),
		cmp.Compare(a.turn, b.turn), cmp.Compare(a.runAt, b.runAt), cmp.Compare(a.id, b.id))
}

// groupLook is what a claim saw of one group (key) it found through a
// mark.
type groupLook struct {
	name  string
	key   keyState    // its row, or the limit a row created now gets
	free  int         // max_running - running, as the claim began
	takes int         // how many of its heads it may take: free, capped at its tokens and the claim's limit
	heads []candidate // its first due jobs, takes of them, plus one when a cap is what stops it
}

// claimIn picks and takes the jobs of one claim inside tx. freed reports
// whether a group it looked at still has a free slot and a job to give;
// next holds the next starts of the keys it left out of tokens with a job
// to give.
func claimIn(ctx context.Context, tx *sql.Tx, p readpast.ClaimParams, queues []string, now time.Time, token string) (jobs []*readpast.Job, freed bool, next []time.Time, err error) {
	now = atMicros(now) // the jobs' started_at, and the buckets' clock
	nowUS := micros(now)
	if queues, err = openQueues(ctx, tx, queues); err != nil || len(queues) == 0 {
		return nil, false, next, err
	}
	var cands []candidate
	for _, q := range queues {
		got, err := queryCandidates(ctx, tx, ungroupedSQL, q, nowUS, p.Limit)
		if err != nil {
			return nil, false, next, err
		}
		cands = append(cands, got...)
	}
	looks, err := lookAtMarkedGroups(ctx, tx, queues, p.Limit, now)
	if err != nil {
		return nil, false, next, err
	}
	// With a head that has later keys, the claim fits every candidate to
	// the budgets of all the keys it names (keys.go), which also bound a
	// first key's own heads: then every head read is a candidate, so that
	// one a later key holds back leaves its place to the next, and one
	// whose later key is full already counts in no round.
	var fit *keyFit
	if slices.ContainsFunc(looks, func(g groupLook) bool {
		return slices.ContainsFunc(g.heads, func(h candidate) bool { return len(h.more) > 0 })
	}) {
		if fit, err = newKeyFit(ctx, tx, looks, queues); err != nil {
			return nil, false, next, err
		}
	}
	for _, g := range looks {
		n := 0 // the key's heads this claim may take so far: a round counts only those
		for i, h := range g.heads {
			if (i < g.takes || fit != nil) && slices.Contains(queues, h.queue) {
				h.round = g.key.round(n)
				if !fit.fullNow(h) {
					n++
				}
				cands = append(cands, h)
			}
		}
	}
	slices.SortFunc(cands, claimOrder)
	if fit != nil {
		cands = fit.take(cands, p.Limit, now)
	} else {
		cands = cands[:min(len(cands), p.Limit)]
	}

	taken := map[string]int{}
	picked := make(map[int64]bool, len(cands))
	ids := make([]int64, len(cands))
	for i, c := range cands {
		ids[i] = c.id
		picked[c.id] = true
		if c.group != "" {
			taken[c.group]++
		}
	}
	if len(ids) > 0 {
		rows, err := tx.QueryContext(ctx, claimUpdateSQL, idsJSON(ids), p.Worker, nowUS, micros(now.Add(p.Lease)), token)
		if err != nil {
			return nil, false, next, err
		}
		for rows.Next() {
			j, err := scanClaimedJob(rows)
			if err != nil {
				rows.Close()
				return nil, false, next, err
			}
			jobs = append(jobs, j)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, false, next, err
		}
		if len(jobs) != len(ids) {
			return nil, false, next, fmt.Errorf("claimed %d of %d picked jobs", len(jobs), len(ids))
		}
	}
	// Every group looked at is decided: the ones it took jobs of count
	// them (and spend their tokens), its due marks are used up, and a
	// group with a free slot left is marked again at its first job this
	// claim did not take, in each queue: at the job's run_at, or at the
	// bucket's next start when its tokens ran out (its own, or those of
	// the later keys that held the job back). A job a full later key held
	// back gets no mark when its group started nothing in this claim: the
	// group waits for that key instead (keys.go).
	if len(looks) > 0 {
		names := make([]string, len(looks))
		var (
			marks []candidate
			waits [][2]string
		)
		skip := picked
		if fit != nil {
			skip = maps.Clone(picked)
			for id := range fit.held {
				if fit.fullHeld(id) {
					skip[id] = true
				}
			}
		}
		for i, g := range looks {
			names[i] = g.name
			b, moved := g.key.bucket, false
			n, also := taken[g.name], fit.laterUses(g.name)
			if n+also > 0 {
				if b, moved, err = takeKey(ctx, tx, g.name, g.key, n, also, now); err != nil {
					return nil, false, next, fmt.Errorf("take group slots: %w", err)
				}
			}
			at := micros(b.NextStart(now))
			if g.free-n-also <= 0 {
				// Full, and maybe out of tokens: what frees a slot before
				// the next start marks the next job then, and sets an
				// alarm for it (announceHeads); but a second store on
				// the file that frees it tells this one nothing, so the
				// claim sets one too.
				if n+also > 0 && b.Interval > 0 && at > nowUS {
					next = append(next, time.UnixMicro(at))
				}
				continue
			}
			waits = append(waits, fit.waitsOn(g, picked)...)
			turn := g.key.servedAt
			if moved {
				turn = nowUS
			}
			// A group that started a job in this claim is marked as usual,
			// held jobs included: the next claim reads on past them, so
			// claims of a few jobs still reach its jobs behind them. One
			// that started none waits for the full key.
			gskip := skip
			if n > 0 {
				gskip = picked
			}
			for _, m := range firstPerQueue(g.heads, gskip) {
				if b.Interval > 0 && at > m.runAt {
					m.runAt = at
					next = append(next, time.UnixMicro(at))
				}
				// A job held for a later key's tokens marks its group at
				// that key's next start, unless the group started a job in
				// this claim: then the next claim reads on past it.
				if until := fit.heldUntil(m.id); n == 0 && until > m.runAt {
					m.runAt = until
					next = append(next, time.UnixMicro(until))
				}
				m.runAt = max(m.runAt, turn)
				marks = append(marks, m)
			}
		}
		if err := fit.saveLater(ctx, tx, now); err != nil {
			return nil, false, next, err
		}
		if err := addWaiters(ctx, tx, waits); err != nil {
			return nil, false, next, err
		}
		js, err := json.Marshal(names)
		if err != nil {
			return nil, false, next, err
		}
		if _, err := tx.ExecContext(ctx, dropDueMarksSQL, string(js), nowUS); err != nil {
			return nil, false, next, err
		}
		if err := insertMarks(ctx, tx, marks); err != nil {
			return nil, false, next, err
		}
		freed = slices.ContainsFunc(marks, func(m candidate) bool { return m.runAt <= nowUS })
	}
	slices.SortFunc(jobs, func(a, b *readpast.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, freed, next, nil
}

// openQueues returns the queues that are not paused, in order.
func openQueues(ctx context.Context, tx *sql.Tx, queues []string) ([]string, error) {
	js, err := json.Marshal(queues)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, pausedAmongSQL, string(js))
	if err != nil {
		return nil, err
	}
	paused := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		paused[name] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	if len(paused) == 0 {
		return queues, nil
	}
	open := make([]string, 0, len(queues))
	for _, q := range queues {
		if !paused[q] {
			open = append(open, q)
		}
	}
	return open, nil
}

// lookAtMarkedGroups finds the groups that the due marks of each queue
// name, in claim order, up to limit of them per queue that may give a
// job (a free slot, a token and a due job), and reads, for each, its free
// slots and first due jobs. It reads marks until it has found those
// groups or read them all, however many marks one group has (a
// completion and an enqueue behind it each mark the group) and however
// many groups that give nothing come first: the claim then uses up every
// due mark of each group it looked at, so each mark is read once.
func lookAtMarkedGroups(ctx context.Context, tx *sql.Tx, queues []string, limit int, now time.Time) ([]groupLook, error) {
	nowUS := micros(now)
	var names []string
	named := map[string]bool{}
	for _, q := range queues {
		rows, err := tx.QueryContext(ctx, markedGroupsSQL, q, nowUS)
		if err != nil {
			return nil, err
		}
		seen, open := map[string]bool{}, 0
		for open < limit && rows.Next() {
			var (
				g                       string
				hasJob                  bool
				running, maxRunning, iv sql.NullInt64
				burst                   sql.NullInt32
				tat                     sql.NullInt64
			)
			if err := rows.Scan(&g, &hasJob, &running, &maxRunning, &iv, &burst, &tat); err != nil {
				rows.Close()
				return nil, err
			}
			if seen[g] {
				continue
			}
			seen[g] = true
			// A key without a row has every slot and token free.
			givesNothing := !hasJob || running.Valid &&
				(running.Int64 >= maxRunning.Int64 || bucketOf(iv.Int64, int(burst.Int32), tat).Tokens(now) == 0)
			if !givesNothing {
				open++
			}
			if !named[g] {
				named[g] = true
				names = append(names, g)
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
	}
	keys, err := readKeys(ctx, tx, names)
	if err != nil {
		return nil, err
	}
	looks := make([]groupLook, 0, len(names))
	for i, name := range names {
		k := keys[i]
		free := k.free()
		g := groupLook{name: name, key: k, free: free, takes: max(0, min(free, limit))}
		if tokens := k.bucket.Tokens(now); tokens >= 0 {
			g.takes = min(g.takes, tokens)
		}
		fetch := g.takes
		if free > g.takes {
			fetch++
		}
		if fetch > 0 {
			if g.heads, err = queryCandidates(ctx, tx, groupHeadSQL, name, nowUS, fetch); err != nil {
				return nil, err
			}
			// Heads that name more keys may be held back by them: read one
			// job more, which may start in their place, so that a held
			// first job does not hide the key's jobs behind it.
			if fetch == g.takes && len(g.heads) == fetch &&
				slices.ContainsFunc(g.heads, func(h candidate) bool { return len(h.more) > 0 }) {
				if g.heads, err = queryCandidates(ctx, tx, groupHeadSQL, name, nowUS, fetch+1); err != nil {
					return nil, err
				}
			}
			for i := range g.heads {
				g.heads[i].turn = max(g.heads[i].runAt, k.servedAt)
			}
		}
		looks = append(looks, g)
	}
	return looks, nil
}

// queryCandidates runs a statement returning (id, queue, priority, run_at,
// group_key, more_keys) rows, with args.
func queryCandidates(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]candidate, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []candidate
	for rows.Next() {
		var (
			c           candidate
			group, more sql.NullString
		)
		if err := rows.Scan(&c.id, &c.queue, &c.priority, &c.runAt, &group, &more); err != nil {
			rows.Close()
			return nil, err
		}
		c.group = group.String
		if more.Valid {
			var err error
			if c.more, err = parseMoreKeys(more); err != nil {
				rows.Close()
				return nil, fmt.Errorf("job %d: %w", c.id, err)
			}
		}
		c.turn = c.runAt
		out = append(out, c)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// firstPerQueue returns, from heads in claim order, the first one not in
// skip in each queue.
func firstPerQueue(heads []candidate, skip map[int64]bool) []candidate {
	var out []candidate
	seen := map[string]bool{}
	for _, h := range heads {
		if !skip[h.id] && !seen[h.queue] {
			seen[h.queue] = true
			out = append(out, h)
		}
	}
	return out
}

// insertMarks adds a ready mark for each job.
func insertMarks(ctx context.Context, tx *sql.Tx, marks []candidate) error {
	if len(marks) == 0 {
		return nil
	}
	rows := make([][5]any, len(marks))
	for i, m := range marks {
		rows[i] = [5]any{m.queue, m.priority, m.runAt, m.id, m.group}
	}
	js, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, insertMarksSQL, string(js))
	return err
}

// markJobs adds a ready mark for each grouped job of ids, as it is now:
// the jobs an enqueue, a retry or a failure made pending.
func markJobs(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, markJobsSQL, idsJSON(ids))
	return err
}

// announceHeads marks the next claimable jobs of the groups that just had
// slots freed (or a limit changed): for each such group with a free slot,
// among its first free (at most 64) due jobs across all queues, the first
// one in each queue. A group's free slots are known[group] when given
// (the rows releaseGroups just deleted: nothing running, a full bucket),
// else read from its row, or for a missing row those of the limit that
// governs the key. A key out of tokens is marked at its next start. It
// reports the wake-up its marks call for: now for a mark due now, an
// alarm for one due later.
func announceHeads(ctx context.Context, tx *sql.Tx, groups []string, known map[string]int, nowUS int64) (wakeup, error) {
	var (
		marks []candidate
		w     wakeup
	)
	now := time.UnixMicro(nowUS)
	for _, g := range groups {
		free, ok := known[g]
		var next time.Time
		var turn int64
		if !ok {
			k, err := readKey(ctx, tx, g)
			if err != nil {
				return wakeup{}, err
			}
			free = k.free()
			next = k.bucket.NextStart(now)
			turn = k.servedAt
		}
		if free <= 0 {
			continue
		}
		heads, err := queryCandidates(ctx, tx, groupHeadSQL, g, nowUS, min(free, 64))
		if err != nil {
			return wakeup{}, err
		}
		for _, m := range firstPerQueue(heads, nil) {
			if !next.IsZero() {
				m.runAt = max(m.runAt, micros(next))
			}
			m.runAt = max(m.runAt, turn)
			if m.runAt <= nowUS {
				w.now = true
			} else {
				w.later = append(w.later, time.UnixMicro(m.runAt))
			}
			marks = append(marks, m)
		}
	}
	return w, insertMarks(ctx, tx, marks)
}
