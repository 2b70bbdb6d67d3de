package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/storekit"
)

// canonToken returns a token in the canonical form the statements cast to
// uuid; false for a malformed token, which can never be current.
func canonToken(t string) (string, bool) {
	u, err := uuid.Parse(t)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// batch is the part of a Complete or Fail batch that reaches the
// database: each distinct (id, well-formed token) pair once, in id order,
// so every statement locks job rows in the same order.
type batch struct {
	idx    []int // positions in the caller's slice
	ids    []int64
	tokens []string // canonical (canonToken)
	// uuids are the tokens as the statements' uuid[] parameter takes
	// them: sent as text, pgx built an encode error for every element
	// before falling back (2-3% of a drain's client CPU).
	uuids []pgtype.UUID
}

// newBatch collects the acting entries of a batch of n: those that are the
// first of their pair (storekit.FirstPairs) with a well-formed token,
// sorted by id. Entries with a malformed token go to malformed instead:
// such a token is never current.
func newBatch(first []int, entry func(i int) (int64, string)) (b, malformed batch) {
	type acting struct {
		i  int
		id int64
		u  uuid.UUID
	}
	var order []acting
	for i, f := range first {
		if f != i {
			continue
		}
		id, tok := entry(i)
		u, err := uuid.Parse(tok)
		if err != nil {
			malformed.addMalformed(i, id)
			continue
		}
		order = append(order, acting{i, id, u})
	}
	slices.SortStableFunc(order, func(a, c acting) int { return cmp.Compare(a.id, c.id) })
	b = batch{idx: make([]int, 0, len(order)), ids: make([]int64, 0, len(order)),
		tokens: make([]string, 0, len(order)), uuids: make([]pgtype.UUID, 0, len(order))}
	for _, e := range order {
		b.add(e.i, e.id, e.u)
	}
	return b, malformed
}

// add appends entry i, for job id with token u.
func (b *batch) add(i int, id int64, u uuid.UUID) {
	b.idx = append(b.idx, i)
	b.ids = append(b.ids, id)
	b.tokens = append(b.tokens, u.String())
	b.uuids = append(b.uuids, pgtype.UUID{Bytes: u, Valid: true})
}

// addMalformed appends entry i, for job id with a malformed token.
func (b *batch) addMalformed(i int, id int64) {
	b.idx = append(b.idx, i)
	b.ids = append(b.ids, id)
	b.tokens = append(b.tokens, "")
	b.uuids = append(b.uuids, pgtype.UUID{})
}

// explain settles the entries of b whose write matched nothing: nil when
// the job already succeeded with that very token (a retried completion),
// ErrStaleToken when the job exists, ErrNotFound otherwise.
func explain(ctx context.Context, q querier, b batch, done map[int64]string, errs []error, completing bool) error {
	var missing []int64
	for k, id := range b.ids {
		if tok, ok := done[id]; !ok || tok != b.tokens[k] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	type where struct{ state, token string }
	found := map[int64]where{}
	rows, err := q.Query(ctx, tokenStatesSQL, missing)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var state string
		var token *string
		if err := rows.Scan(&id, &state, &token); err != nil {
			return err
		}
		w := where{state: state}
		if token != nil {
			w.token = *token
		}
		found[id] = w
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for k, id := range b.ids {
		if tok, ok := done[id]; ok && tok == b.tokens[k] {
			continue
		}
		w, ok := found[id]
		switch {
		case !ok:
			errs[b.idx[k]] = readpast.ErrNotFound
		case completing && w.state == string(readpast.StateSucceeded) && w.token == b.tokens[k]:
			errs[b.idx[k]] = nil
		default:
			errs[b.idx[k]] = readpast.ErrStaleToken
		}
	}
	return nil
}

// complete runs stmt, sql/complete.sql or its routine
// (completeRoutine.call), on q in mode, as claim does; notify says
// whether the statement sends the NOTIFY that wakes other processes'
// claimers for the slots it frees itself (inside a caller's transaction)
// or leaves it to the caller.
//
// It reports whether a job it completed was a flow's parent (its
// children may be pending now, ahead of a claim position), and whether
// it freed a key's slot.
func complete(ctx context.Context, q querier, mode pgx.QueryExecMode, stmt string, cs []readpast.Completion, notify bool) (errs []error, parents, freed bool, _ error) {
	errs = make([]error, len(cs))
	for i, c := range cs {
		errs[i] = readpast.CheckResult(c.Result)
	}
	entry := func(i int) (int64, string) { return cs[i].ID, storekit.CanonToken(cs[i].Token) }
	first := storekit.FirstPairs(len(cs), entry, func(i int) bool { return errs[i] != nil })
	b, malformed := newBatch(first, entry)
	var done map[int64]string
	if len(b.ids) > 0 {
		results := make([]*string, len(b.idx))
		for k, i := range b.idx {
			if r := cs[i].Result; len(r) > 0 {
				str := string(r)
				results[k] = &str
			}
		}
		rows, err := q.Query(ctx, stmt, mode, b.ids, b.uuids, results, notify)
		var flags []bool
		done, flags, err = flaggedOn(rows, err, 2)
		if err != nil {
			return nil, false, false, opErr("complete", err)
		}
		parents, freed = flags[0], flags[1]
		if err := explain(ctx, q, b, done, errs, true); err != nil {
			return nil, false, false, opErr("complete", err)
		}
	}
	if err := explain(ctx, q, malformed, nil, errs, false); err != nil {
		return nil, false, false, opErr("complete", err)
	}
	storekit.SettleRepeats(errs, first, true)
	return errs, parents, freed, nil
}

// Complete finishes running jobs as succeeded in one statement. An entry
// whose result cannot be stored gets a *readpast.FieldError; the rest of
// the batch completes. Each (id, token) pair acts once (see
// storekit.FirstPairs).
func (s *Store) Complete(ctx context.Context, cs []readpast.Completion) ([]error, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	defer s.out.enter()() // Close waits for the wake-up of what it commits
	began := time.Now()
	parents, freed := false, false
	errs, err := withRoutines(ctx, s, func() ([]error, error) {
		return retryDeadlock(ctx, func() ([]error, error) {
			errs, p, f, err := complete(ctx, s.pool, s.routineMode, completeRoutine.call, cs, false)
			parents, freed = p, f
			return errs, err
		})
	})
	s.dropIdleAfter(ctx, began, err)
	if freed || err != nil {
		// Other processes' claimers learn of the slots from a NOTIFY sent
		// after the commit, not in it (notify.go); after an error too,
		// since the statement may have committed (its answer lost, or a
		// later read failed).
		s.wakeOthers()
	}
	if parents {
		// Children released, maybe ahead of a claim position: the next
		// claims are full ones, then the claimers wake (also where no
		// NOTIFY reaches this store, behind a transaction pooler).
		s.pendingAgain()
	}
	return errs, err
}

// CompleteTx completes one job inside the caller's transaction, so the
// handler's writes and the completion commit together. It returns
// readpast.ErrStaleToken when the claim is no longer current. Until tx
// ends it holds the job's row and, for a grouped job, its group's row:
// FOR KEY SHARE only when the key has no concurrency bound or has room
// (fewer running than its bound), and claims take its jobs meanwhile,
// only a limit change waiting; written when the key is full, and claims
// pass it over meanwhile, and SetGroupLimit on it waits.
//
// Run it in a READ COMMITTED transaction (PostgreSQL's default). The
// group's next job is marked for claimers by a query that must see jobs
// committed after tx began; under REPEATABLE READ or SERIALIZABLE it sees
// tx's snapshot only, and a job that joined the group meanwhile can wait
// for the group's next event (docs/design/groups.md, "Concurrency groups").
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, c readpast.Completion) error {
	if tx == nil {
		return errors.New("postgres: CompleteTx: nil transaction")
	}
	errs, parents, _, err := complete(ctx, tx, s.hotMode, completeSQL, []readpast.Completion{c}, true)
	if err != nil {
		return err
	}
	if parents {
		s.pendingAgain() // if tx commits; a spurious wake costs a claim
	}
	return errs[0]
}

// Fail records failed attempts in one statement. Each (id, token) pair
// acts once; a repeat finds the claim ended (readpast.ErrStaleToken).
func (s *Store) Fail(ctx context.Context, fs []readpast.Failure) ([]error, error) {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	if len(fs) == 0 {
		return nil, nil
	}
	defer s.out.enter()() // Close waits for the wake-up of what it commits
	began := time.Now()
	bad := make([]error, len(fs))
	for i, f := range fs {
		bad[i] = f.Check()
	}
	entry := func(i int) (int64, string) { return fs[i].ID, storekit.CanonToken(fs[i].Token) }
	first := storekit.FirstPairs(len(fs), entry, func(i int) bool { return bad[i] != nil })
	b, malformed := newBatch(first, entry)
	msgs, stacks := make([]string, len(b.idx)), make([]string, len(b.idx))
	retryAt, discard := make([]*time.Time, len(b.idx)), make([]bool, len(b.idx))
	for k, i := range b.idx {
		f := fs[i].Normalize()
		msgs[k], stacks[k], discard[k] = f.Message, f.Stack, f.Discard
		if !f.RetryAt.IsZero() {
			retryAt[k] = &f.RetryAt
			s.dueAt(began, f.RetryAt, false) // this store's claimers take the retry when it is due
		}
	}
	errs, err := retryDeadlock(ctx, func() ([]error, error) {
		errs := slices.Clone(bad)
		if len(b.ids) > 0 {
			rows, err := s.pool.Query(ctx, failSQL, s.hotMode, b.ids, b.uuids, msgs, stacks, retryAt, discard)
			done, wake, err := flaggedOn(rows, err, 1)
			if err != nil {
				return nil, opErr("fail", err)
			}
			if wake[0] {
				s.wakeOthers() // after the commit, not in it (notify.go)
			}
			if err := explain(ctx, s.pool, b, done, errs, false); err != nil {
				return nil, opErr("fail", err)
			}
			s.pendingAgain() // a retry may be claimable now
		}
		if err := explain(ctx, s.pool, malformed, nil, errs, false); err != nil {
			return nil, opErr("fail", err)
		}
		storekit.SettleRepeats(errs, first, false)
		return errs, nil
	})
	s.dropIdleAfter(ctx, began, err)
	if err != nil {
		s.wakeOthers() // the statement may have committed (as Complete)
	}
	return errs, err
}

// Extend renews a running job's lease.
func (s *Store) Extend(ctx context.Context, id int64, token string, lease time.Duration) (time.Time, error) {
	if err := readpast.CheckLease(lease); err != nil {
		return time.Time{}, err
	}
	tok, ok := canonToken(token)
	if !ok {
		return time.Time{}, s.staleOrMissing(ctx, id)
	}
	var exp time.Time
	began := time.Now()
	err := s.pool.QueryRow(ctx, extendSQL, id, tok, lease.Microseconds()).Scan(&exp)
	s.dropIdleAfter(ctx, began, err)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, s.staleOrMissing(ctx, id)
	}
	if err != nil {
		return time.Time{}, opErr("extend", err)
	}
	return exp.UTC(), nil
}

// Release gives a running job back unworked: pending at once, its attempt
// not counted, its group slot freed.
func (s *Store) Release(ctx context.Context, id int64, token string) error {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	tok, ok := canonToken(token)
	if !ok {
		return s.staleOrMissing(ctx, id)
	}
	n, err := retryDeadlock(ctx, func() (n int, err error) {
		err = s.pool.QueryRow(ctx, releaseSQL, s.hotMode, id, tok, int64(0)).Scan(&n)
		return n, err
	})
	if err != nil {
		return opErr("release", err)
	}
	if n == 0 {
		return s.staleOrMissing(ctx, id)
	}
	s.pendingAgain()
	return nil
}

// Snooze puts a running job back to pending at now+d, its attempt not
// counted, its snoozes one more, its group slot freed (sql/snooze.sql).
func (s *Store) Snooze(ctx context.Context, id int64, token string, d time.Duration) error {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	if err := readpast.CheckSnooze(d); err != nil {
		return err
	}
	tok, ok := canonToken(token)
	if !ok {
		return s.staleOrMissing(ctx, id)
	}
	n, err := retryDeadlock(ctx, func() (n int, err error) {
		err = s.pool.QueryRow(ctx, snoozeSQL, s.hotMode, id, tok, d.Microseconds()).Scan(&n)
		return n, err
	})
	if err != nil {
		return opErr("snooze", err)
	}
	if n == 0 {
		return s.staleOrMissing(ctx, id)
	}
	s.dueAt(time.Now(), time.Now().Add(d), false)
	s.pendingAgain()
	return nil
}

// staleOrMissing explains a token write that matched nothing.
func (s *Store) staleOrMissing(ctx context.Context, id int64) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	return readpast.ErrStaleToken
}
