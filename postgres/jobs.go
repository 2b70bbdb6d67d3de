package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/readpast/readpast"
)

var (
	_ readpast.GroupPruner = (*Store)(nil)
	_ readpast.SQLTxStore  = (*Store)(nil)
)

// querier runs statements on a pool, a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// enqueueCols holds jobs validated and laid out as the parallel arrays of
// sql/enqueue.sql and sql/enqueue_unique.sql. A zero RunAt goes as NULL:
// now on the database's clock.
type enqueueCols struct {
	queues, kinds, payloads []string
	prios, maxAtt           []int32
	runAt                   []*time.Time
	groups, keys            []*string
	uniqueFor               []*int64
	tags                    []*string
	payloadBytes            int // the payloads' total size
}

// newEnqueueCols validates jobs and lays them out. index maps the position
// of a job to the one errors name (nil: the same).
func newEnqueueCols(jobs []readpast.EnqueueParams, index []int) (*enqueueCols, error) {
	now := time.Now()
	n := len(jobs)
	c := &enqueueCols{
		queues: make([]string, n), kinds: make([]string, n), payloads: make([]string, n),
		prios: make([]int32, n), maxAtt: make([]int32, n), runAt: make([]*time.Time, n),
		groups: make([]*string, n), keys: make([]*string, n), uniqueFor: make([]*int64, n), tags: make([]*string, n),
	}
	for i, p := range jobs {
		runNow := p.RunAt.IsZero()
		p, err := p.Normalize(now)
		if err != nil {
			pos := i
			if index != nil {
				pos = index[i]
			}
			return nil, fmt.Errorf("job %d: %w", pos, err)
		}
		c.queues[i], c.kinds[i], c.payloads[i] = p.Queue, p.Kind, string(p.Payload)
		c.payloadBytes += len(p.Payload)
		c.prios[i], c.maxAtt[i] = int32(p.Priority), int32(p.MaxAttempts)
		if !runNow {
			c.runAt[i] = &p.RunAt
		}
		if p.Group != "" {
			c.groups[i] = &p.Group
		}
		if p.UniqueKey != "" {
			c.keys[i] = &p.UniqueKey
		}
		if p.UniqueFor > 0 {
			us := p.UniqueFor.Microseconds()
			c.uniqueFor[i] = &us
		}
		if len(p.Tags) > 0 {
			// Tags never contain a space (Normalize checks).
			t := strings.Join(p.Tags, " ")
			c.tags[i] = &t
		}
	}
	return c, nil
}

// jobs is how many jobs c holds.
func (c *enqueueCols) jobs() int { return len(c.queues) }

// add puts o's jobs after c's.
func (c *enqueueCols) add(o *enqueueCols) {
	c.payloadBytes += o.payloadBytes
	c.queues, c.kinds, c.payloads = append(c.queues, o.queues...), append(c.kinds, o.kinds...), append(c.payloads, o.payloads...)
	c.prios, c.maxAtt, c.runAt = append(c.prios, o.prios...), append(c.maxAtt, o.maxAtt...), append(c.runAt, o.runAt...)
	c.groups, c.keys = append(c.groups, o.groups...), append(c.keys, o.keys...)
	c.uniqueFor, c.tags = append(c.uniqueFor, o.uniqueFor...), append(c.tags, o.tags...)
}

// args are the statement's parameters: sql/enqueue_unique.sql's with
// keyed, else sql/enqueue.sql's (without its last, the notify flag).
func (c *enqueueCols) args(keyed bool) []any {
	if keyed {
		return []any{c.queues, c.kinds, c.payloads, c.prios, c.runAt, c.maxAtt, c.groups, c.keys, c.uniqueFor, c.tags}
	}
	return []any{c.queues, c.kinds, c.payloads, c.prios, c.runAt, c.maxAtt, c.groups, c.tags}
}

// enqueueArgs validates jobs and lays them out as the parameters of
// sql/enqueue.sql, or with keyed sql/enqueue_unique.sql (enqueueCols).
func enqueueArgs(jobs []readpast.EnqueueParams, keyed bool, index []int) ([]any, error) {
	c, err := newEnqueueCols(jobs, index)
	if err != nil {
		return nil, err
	}
	return c.args(keyed), nil
}

// jobRows is what pgx.Rows and *sql.Rows have in common for reading.
type jobRows interface {
	scanner
	Next() bool
	Err() error
}

// scanJobs reads every row of a job-returning statement.
func scanJobs(rows jobRows) ([]*readpast.Job, error) {
	var jobs []*readpast.Job
	var js jobScanner
	for rows.Next() {
		j, err := js.scan(rows)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

func collectJobs(rows pgx.Rows) ([]*readpast.Job, error) {
	defer rows.Close()
	return scanJobs(rows)
}

// enqueue runs sql/enqueue.sql (or the keyed enqueue) on q. notify says
// whether the statement sends the wake-up NOTIFY itself (see notifier);
// keyed enqueues always do.
func enqueue(ctx context.Context, q querier, jobs []readpast.EnqueueParams, notify bool) ([]*readpast.Job, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	if anyKey(jobs) {
		return enqueueKeyedOp(ctx, pgxSource{q}, jobs)
	}
	cols, err := newEnqueueCols(jobs, nil)
	if err != nil {
		return nil, err
	}
	return insertJobs(ctx, q, cols, notify)
}

// insertJobs runs sql/enqueue.sql on q for jobs without unique keys, laid
// out; notify as for enqueue.
func insertJobs(ctx context.Context, q querier, cols *enqueueCols, notify bool) ([]*readpast.Job, error) {
	rows, err := q.Query(ctx, enqueueSQL, append(cols.args(false), notify)...)
	if err != nil {
		return nil, opErr("enqueue", err)
	}
	out, err := collectJobs(rows)
	if err != nil {
		return nil, opErr("enqueue", err)
	}
	return out, nil
}

// insert writes jobs without unique keys in one statement of their own,
// which sends the wake-up NOTIFY or leaves it to the notifier's trailing
// one.
func (s *Store) insert(ctx context.Context, cols *enqueueCols) ([]*readpast.Job, error) {
	notify := s.notify.due()
	out, err := insertJobs(ctx, s.pool, cols, notify)
	if err == nil && !notify {
		s.notify.trail()
	}
	return out, err
}

// Enqueue inserts jobs in one statement: all or none. A batch with unique
// keys runs in a transaction of its own (see enqueueKeyed). Calls without
// keys that come while others are being written share the next statement
// (see enqueuer): a call's jobs still commit all or none, with ascending
// ids in its order, and a call with a bad job fails alone.
func (s *Store) Enqueue(ctx context.Context, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	var (
		out []*readpast.Job
		err error
	)
	switch {
	case oneKeyOnly(jobs):
		// One key and nothing else: a round that does not settle it
		// changed nothing, so no transaction is needed around the rounds.
		out, err = enqueue(ctx, s.pool, jobs, true)
	case anyKey(jobs):
		out, err = retryDeadlock(ctx, func() ([]*readpast.Job, error) {
			var out []*readpast.Job
			err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				var err error
				out, err = enqueueKeyed(ctx, pgxSource{tx}, jobs)
				return err
			})
			return out, err
		})
		if err != nil && !errors.Is(err, readpast.ErrInvalid) {
			err = opErr("enqueue", err)
		}
	case len(jobs) == 0:
	default:
		// Concurrent calls share statements (see enqueuer).
		cols, verr := newEnqueueCols(jobs, nil)
		if verr != nil {
			return nil, verr
		}
		out, err = s.enq.enqueue(ctx, cols)
	}
	if err == nil && len(out) > 0 {
		s.claimFrom.enqueued(out)
		s.hub.Broadcast()
		s.dueLater(out, true)
	}
	return out, err
}

// EnqueueTx inserts jobs inside the caller's transaction: they exist if and
// only if tx commits. Workers are woken when it commits.
func (s *Store) EnqueueTx(ctx context.Context, tx pgx.Tx, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	defer s.claimFrom.ahead() // its jobs' run_at is tx's start (claimfrom.go)
	out, err := enqueue(ctx, tx, jobs, true)
	if err == nil {
		s.dueLater(out, true) // if tx commits; a spurious alarm costs a claim
	}
	return out, err
}

// Claim takes up to p.Limit jobs in one statement (sql/claim.sql) that
// never waits on a row lock. Every job of the claim carries the same fresh
// token. A claim of one queue starts where the store's last claim of it
// ended, with a full claim from the head at least every second
// (claimfrom.go).
//
// When the statement's outcome is unknown (the context ended or the
// connection failed while it ran: pgx then drops the connection, and the
// server may have committed, or may still commit), Claim settles it before
// returning the error: it ends the server session that ran the claim if
// that session is still there, waits for it to go (its outcome is then
// final), and gives back whatever the claim took, by its token. Those jobs
// are pending again at once with their attempt uncounted, instead of
// waiting for their leases to expire.
func (s *Store) Claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, err
	}
	return withRoutines(ctx, s, func() ([]*readpast.Job, error) { return s.claim(ctx, p) })
}

// claim is Claim on the claim routine.
func (s *Store) claim(ctx context.Context, p readpast.ClaimParams) ([]*readpast.Job, error) {
	began := time.Now()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, opErr("claim", err)
	}
	pid := conn.Conn().PgConn().PID()
	token := uuid.NewString()
	st := s.claimFrom.start(p.Queues, p.Limit, time.Now())
	var jobs []*readpast.Job
	if s.claimInTx.Load() {
		jobs, err = claimReadCommitted(ctx, conn, s.routineMode, p, token, st.args()...)
	} else {
		jobs, err = claim(ctx, conn, s.routineMode, claimRoutine.call, p, token, st.args()...)
		if notReadCommitted(err) {
			// The session's default isolation is stricter than READ
			// COMMITTED (the routine refused before doing anything):
			// from now on every claim runs in a transaction of its own.
			s.claimInTx.Store(true)
			jobs, err = claimReadCommitted(ctx, conn, s.routineMode, p, token, st.args()...)
		}
	}
	conn.Release()
	s.claimFrom.claimed(st, jobs)
	s.dropIdleAfter(ctx, began, err)
	if err != nil && outcomeUnknown(err) {
		if uerr := s.settleClaim(ctx, pid, token, p.Lease); uerr != nil {
			return nil, fmt.Errorf("%w (and settling the claim failed, so its jobs, if it took any, wait for their leases to expire: %v)", err, uerr)
		}
	}
	return jobs, err
}

// claim runs stmt, sql/claim.sql or its routine (claimRoutine.call, whose
// two more arguments say where it starts, claimfrom.go), on q
// in mode (Store.hotMode): the unnamed statement, which PostgreSQL plans
// with the actual parameters every time, or the routine's call, whose
// statement each server session plans once (see routines.go).
func claim(ctx context.Context, q querier, mode pgx.QueryExecMode, stmt string, p readpast.ClaimParams, token string, more ...any) ([]*readpast.Job, error) {
	args := append([]any{mode, p.Queues, p.Worker, int64(p.Limit), p.Lease.Microseconds(), token}, more...)
	rows, err := q.Query(ctx, stmt, args...)
	if err != nil {
		return nil, opErr("claim", err)
	}
	defer rows.Close()
	jobs, err := scanClaimed(rows, p, token)
	if err != nil {
		return nil, opErr("claim", err)
	}
	return jobs, nil
}

// settleTimeout bounds the settling of a claim whose outcome is unknown.
const settleTimeout = 10 * time.Second

// settleClaim makes the outcome of a claim its caller never learned final,
// then undoes it: the server session pid is ended if it is still the one
// that ran a claim (it may be running it still, or waiting to commit),
// and every job the claim with token took is released. It uses a
// connection of its own: when a claim's outcome is unknown, the pool may
// be full of connections in the same trouble.
func (s *Store) settleClaim(ctx context.Context, pid uint32, token string, lease time.Duration) error {
	defer s.claimFrom.ahead() // the jobs it gives back are pending at their old place (claimfrom.go)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return opErr("connect", err)
	}
	defer closeConn(conn)
	for {
		tag, err := conn.Exec(ctx, endClaimSessionSQL, int64(pid), claimRoutine.call)
		if err != nil {
			return fmt.Errorf("end the claim's session: %w", err)
		}
		if tag.RowsAffected() == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the claim's session did not end: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	_, err = retryDeadlock(ctx, func() (n int, err error) {
		err = conn.QueryRow(ctx, releaseSQL, s.hotMode, nil, token, lease.Microseconds()).Scan(&n)
		return n, err
	})
	if err != nil {
		return fmt.Errorf("release the claim's jobs: %w", err)
	}
	s.pendingAgain()
	return nil
}

// dropIdleAfter closes every connection of the pool (in-use ones as they
// are released) when err says one failed in the middle of a call begun at
// began: a connection lost, or a server silent for silentDead or more.
// The others are likely in the same state (a server restarted, a network
// that cut or half-opened them), and each would cost its next caller a
// timeout of its own to find out: three half-open connections held a
// worker back 30 s in the fault suite's TestNetworkFaults.
//
// A call that ended sooner because its caller's context did (a heartbeat
// allows a third of a lease, a client stopping) says only that the server
// was slower than that caller would wait: pgx closes that one connection
// and the others stay, so that a server slowed by load is not also asked
// for a new session, caches cold, on every connection of every client.
func (s *Store) dropIdleAfter(ctx context.Context, began time.Time, err error) {
	if err == nil || !outcomeUnknown(err) {
		return
	}
	if ctx.Err() != nil && time.Since(began) < silentDead {
		return
	}
	s.pool.Reset()
}

// silentDead is how long a server may leave a call unanswered before the
// pool's connections are presumed dead (see dropIdleAfter): half of the
// client's timeout for a call, which a loaded server answers well within.
const silentDead = 5 * time.Second

// outcomeUnknown reports whether a statement that failed with err may
// still have committed: the server reported no error (a *pgconn.PgError
// means it failed and rolled back), and the request may have been sent.
func outcomeUnknown(err error) bool {
	if errors.Is(err, pgx.ErrNoRows) { // the statement ran and matched nothing
		return false
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && !pgconn.SafeToRetry(err)
}

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
// first of their pair (readpast.FirstPairs) with a well-formed token,
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
// (completeRoutine.call), on q in mode, as claim does.
func complete(ctx context.Context, q querier, mode pgx.QueryExecMode, stmt string, cs []readpast.Completion) ([]error, error) {
	errs := make([]error, len(cs))
	for i, c := range cs {
		errs[i] = readpast.CheckResult(c.Result)
	}
	entry := func(i int) (int64, string) { return cs[i].ID, cs[i].Token }
	first := readpast.FirstPairs(len(cs), entry, func(i int) bool { return errs[i] != nil })
	b, malformed := newBatch(first, entry)
	if len(b.ids) > 0 {
		results := make([]*string, len(b.idx))
		for k, i := range b.idx {
			if r := cs[i].Result; len(r) > 0 {
				str := string(r)
				results[k] = &str
			}
		}
		done, err := actedOn(q.Query(ctx, stmt, mode, b.ids, b.uuids, results))
		if err != nil {
			return nil, opErr("complete", err)
		}
		if err := explain(ctx, q, b, done, errs, true); err != nil {
			return nil, opErr("complete", err)
		}
	}
	if err := explain(ctx, q, malformed, nil, errs, false); err != nil {
		return nil, opErr("complete", err)
	}
	readpast.SettleRepeats(errs, first, true)
	return errs, nil
}

// Complete finishes running jobs as succeeded in one statement. An entry
// whose result cannot be stored gets a *readpast.FieldError; the rest of
// the batch completes. Each (id, token) pair acts once (see
// readpast.FirstPairs).
func (s *Store) Complete(ctx context.Context, cs []readpast.Completion) ([]error, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	began := time.Now()
	errs, err := withRoutines(ctx, s, func() ([]error, error) {
		return retryDeadlock(ctx, func() ([]error, error) {
			return complete(ctx, s.pool, s.routineMode, completeRoutine.call, cs)
		})
	})
	s.dropIdleAfter(ctx, began, err)
	return errs, err
}

// CompleteTx completes one job inside the caller's transaction, so the
// handler's writes and the completion commit together. It returns
// readpast.ErrStaleToken when the claim is no longer current. Until tx
// ends it holds the job's row and, for a grouped job, its group's row:
// claims pass that group over meanwhile, and SetGroupLimit on it waits.
//
// Run it in a READ COMMITTED transaction (PostgreSQL's default). The
// group's next job is marked for claimers by a query that must see jobs
// committed after tx began; under REPEATABLE READ or SERIALIZABLE it sees
// tx's snapshot only, and a job that joined the group meanwhile can wait
// for the group's next event (docs/architecture.md, "Concurrency groups").
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, c readpast.Completion) error {
	errs, err := complete(ctx, tx, s.hotMode, completeSQL, []readpast.Completion{c})
	if err != nil {
		return err
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
	began := time.Now()
	entry := func(i int) (int64, string) { return fs[i].ID, fs[i].Token }
	first := readpast.FirstPairs(len(fs), entry, func(int) bool { return false })
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
		errs := make([]error, len(fs))
		if len(b.ids) > 0 {
			done, err := actedOn(s.pool.Query(ctx, failSQL, s.hotMode, b.ids, b.uuids, msgs, stacks, retryAt, discard))
			if err != nil {
				return nil, opErr("fail", err)
			}
			if err := explain(ctx, s.pool, b, done, errs, false); err != nil {
				return nil, opErr("fail", err)
			}
			s.pendingAgain() // a retry may be claimable now
		}
		if err := explain(ctx, s.pool, malformed, nil, errs, false); err != nil {
			return nil, opErr("fail", err)
		}
		readpast.SettleRepeats(errs, first, false)
		return errs, nil
	})
	s.dropIdleAfter(ctx, began, err)
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
		err = s.pool.QueryRow(ctx, snoozeSQL, pgx.QueryExecModeDescribeExec, id, tok, d.Microseconds()).Scan(&n)
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

// Cancel moves a live job to cancelled.
func (s *Store) Cancel(ctx context.Context, id int64) (*readpast.Job, error) {
	j, err := retryDeadlock(ctx, func() (*readpast.Job, error) { return scanJob(s.pool.QueryRow(ctx, cancelSQL, id)) })
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, s.notLive(ctx, id)
	}
	if err != nil {
		return nil, opErr("cancel", err)
	}
	if j.Group != nil {
		// The job is cancelled either way: the error says so.
		if err := s.markGroupHeads(ctx, *j.Group); err != nil {
			return j, fmt.Errorf("cancel: job %d cancelled, then %w", id, classify(err))
		}
	}
	return j, nil
}

// Retry makes a failed, cancelled or pending job pending now. A job that
// comes back from history takes its unique key again; when another job
// holds it, Retry changes nothing and returns readpast.ErrInvalidState
// naming the holder.
func (s *Store) Retry(ctx context.Context, id int64) (*readpast.Job, error) {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	j, err := retryDeadlock(ctx, func() (*readpast.Job, error) { return scanJob(s.pool.QueryRow(ctx, retrySQL, id)) })
	if errors.Is(err, pgx.ErrNoRows) {
		old, gerr := s.Get(ctx, id)
		if gerr != nil {
			return nil, gerr
		}
		if (old.State == readpast.StateFailed || old.State == readpast.StateCancelled) && old.UniqueKey != "" {
			var holder int64
			if err := s.pool.QueryRow(ctx, uniqueHolderSQL, old.UniqueKey).Scan(&holder); err == nil && holder != id {
				return nil, fmt.Errorf("job %d: its unique key %q is held by job %d: %w", id, old.UniqueKey, holder, readpast.ErrInvalidState)
			}
		}
		return nil, fmt.Errorf("job %d is %s: %w", id, old.State, readpast.ErrInvalidState)
	}
	if err != nil {
		return nil, opErr("retry", err)
	}
	s.pendingAgain()
	return j, nil
}

// notLive explains an admin operation that matched no row.
func (s *Store) notLive(ctx context.Context, id int64) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	return readpast.ErrInvalidState
}

// Get returns a live or finished job.
func (s *Store) Get(ctx context.Context, id int64) (*readpast.Job, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, getSQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %d: %w", id, readpast.ErrNotFound)
	}
	if err != nil {
		return nil, opErr(fmt.Sprintf("get job %d", id), err)
	}
	return j, nil
}

// List returns jobs matching p, newest first.
func (s *Store) List(ctx context.Context, p readpast.ListParams) (readpast.ListResult, error) {
	p, err := p.Normalize()
	if err != nil {
		return readpast.ListResult{}, err
	}
	var after int64
	if p.Cursor != "" {
		after, _ = readpast.DecodeCursor(p.Cursor)
	}
	// One row more than the page says whether another page follows.
	var rows pgx.Rows
	if p.Tag != "" {
		if after == 0 {
			after = math.MaxInt64
		}
		rows, err = s.pool.Query(ctx, listTagSQL, p.Queue, string(p.State), p.Kind, p.Group, after, p.Limit+1, p.Tag)
	} else {
		rows, err = s.pool.Query(ctx, listSQL, p.Queue, string(p.State), p.Kind, p.Group, after, p.Limit+1)
	}
	if err != nil {
		return readpast.ListResult{}, opErr("list", err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return readpast.ListResult{}, opErr("list", err)
	}
	res := readpast.ListResult{Jobs: jobs}
	if len(jobs) > p.Limit {
		res.Jobs = jobs[:p.Limit]
		res.Next = readpast.EncodeCursor(res.Jobs[p.Limit-1].ID)
	}
	return res, nil
}

// Stats counts jobs per queue and state.
func (s *Store) Stats(ctx context.Context) ([]readpast.QueueStats, error) {
	rows, err := s.pool.Query(ctx, statsSQL)
	if err != nil {
		return nil, opErr("stats", err)
	}
	defer rows.Close()
	var out []readpast.QueueStats
	for rows.Next() {
		var st readpast.QueueStats
		var state string
		if err := rows.Scan(&st.Queue, &state, &st.Count); err != nil {
			return nil, opErr("stats", err)
		}
		st.State = readpast.JobState(state)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, opErr("stats", err)
	}
	readpast.SortStats(out)
	return out, nil
}

// RescueExpired ends up to limit expired claims in one statement. It reads
// the leases that expired since its last complete scan, with a full scan at
// least every second (claimfrom.go).
func (s *Store) RescueExpired(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	began := time.Now()
	stmt, args := rescueSQL, []any{s.hotMode, limit}
	after, positioned := s.rescueFrom.start(began)
	if positioned {
		stmt, args = rescueFromSQL, append(args, after)
	}
	var at time.Time
	n, err := retryDeadlock(ctx, func() (n int, err error) {
		err = s.pool.QueryRow(ctx, stmt, args...).Scan(&n, &at)
		return n, err
	})
	if err != nil {
		return 0, opErr("rescue", err)
	}
	s.rescueFrom.scanned(positioned, began, n, limit, at)
	if n > 0 {
		s.pendingAgain() // rescued jobs are pending at their old place
	}
	return n, nil
}

// SetGroupLimit sets how many jobs of group may run at once.
func (s *Store) SetGroupLimit(ctx context.Context, group string, limit int) error {
	if err := readpast.CheckGroupLimit(group, limit); err != nil {
		return err
	}
	if _, err := retryDeadlock(ctx, func() (pgconn.CommandTag, error) {
		return s.pool.Exec(ctx, setGroupLimitSQL, group, limit)
	}); err != nil {
		return opErr("set group limit", err)
	}
	s.hub.Broadcast()
	return nil
}

// PruneGroups deletes up to limit rows of idle groups at the default limit
// (nothing running, limit 1; a missing row means exactly that) and returns
// how many it deleted. Rows other transactions hold are skipped, and it
// never makes an enqueue or a claim wait. Limits set with SetGroupLimit
// (other than 1) are kept. RunRescuer calls it now and then.
func (s *Store) PruneGroups(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, &readpast.FieldError{Field: "limit", Message: "must be at least 1"}
	}
	tag, err := s.pool.Exec(ctx, pruneGroupsSQL, limit)
	if err != nil {
		return 0, opErr("prune groups", err)
	}
	return int(tag.RowsAffected()), nil
}

// Prune deletes one batch of old finished jobs.
func (s *Store) Prune(ctx context.Context, p readpast.PruneParams) (int, error) {
	p, err := p.Normalize()
	if err != nil {
		return 0, err
	}
	var n int
	if err := s.pool.QueryRow(ctx, pruneSQL, string(p.State), p.Before, p.Limit).Scan(&n); err != nil {
		return 0, opErr("prune", err)
	}
	return n, nil
}

// actedOn collects the (id, token) rows a Complete or Fail statement
// returns for the entries that acted: the token each job acted under, by
// id (a statement acts on a job once at most: one row per id).
func actedOn(rows pgx.Rows, err error) (map[int64]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	set := map[int64]string{}
	for rows.Next() {
		var id int64
		var token string
		if err := rows.Scan(&id, &token); err != nil {
			return nil, err
		}
		set[id] = token
	}
	return set, rows.Err()
}

// retryDeadlock runs f again when PostgreSQL aborted it as a deadlock
// victim or a serialization failure; the statement had no effect then.
func retryDeadlock[T any](ctx context.Context, f func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := f()
		var pgErr *pgconn.PgError
		if err == nil || attempt == 5 || !errors.As(err, &pgErr) || (pgErr.Code != "40P01" && pgErr.Code != "40001") {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		}
	}
}

// claimTx runs the claim statement inside tx, whose locks then last until
// tx ends. Store.Claim always runs on its own; tests use this (exported in
// export_test.go) to hold a claim's transaction open and show that other
// claimers never wait on it.
func claimTx(ctx context.Context, tx pgx.Tx, p readpast.ClaimParams) ([]*readpast.Job, error) {
	p, err := p.Normalize()
	if err != nil {
		return nil, err
	}
	// Like the claim routine, take the queues' pause keys first, in a
	// statement of their own (sql/claim_queues.sql).
	if err := tx.QueryRow(ctx, claimQueuesSQL, p.Queues).Scan(&p.Queues); err != nil {
		return nil, opErr("claim", err)
	}
	return claim(ctx, tx, pgx.QueryExecModeDescribeExec, claimSQL, p, uuid.NewString())
}

// PauseQueue stops claims from taking queue's jobs (sql/pause_queue.sql):
// once it returns, no claim takes one. It waits for the claims of queue
// in flight to end; claims never wait for it.
func (s *Store) PauseQueue(ctx context.Context, queue string) error {
	if err := readpast.CheckQueue(queue); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, pauseQueueSQL, queue); err != nil {
		return opErr("pause queue", err)
	}
	return nil
}

// ResumeQueue lets claims take queue's jobs again.
func (s *Store) ResumeQueue(ctx context.Context, queue string) error {
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	if err := readpast.CheckQueue(queue); err != nil {
		return err
	}
	var n int
	if err := s.pool.QueryRow(ctx, resumeQueueSQL, queue).Scan(&n); err != nil {
		return opErr("resume queue", err)
	}
	if n > 0 {
		s.pendingAgain()
	}
	return nil
}

// Queues lists every queue with jobs or paused.
func (s *Store) Queues(ctx context.Context) ([]readpast.QueueInfo, error) {
	stats, err := s.Stats(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, pausedQueuesSQL)
	if err != nil {
		return nil, opErr("queues", err)
	}
	defer rows.Close()
	paused := map[string]time.Time{}
	for rows.Next() {
		var name string
		var at time.Time
		if err := rows.Scan(&name, &at); err != nil {
			return nil, opErr("queues", err)
		}
		paused[name] = at
	}
	if err := rows.Err(); err != nil {
		return nil, opErr("queues", err)
	}
	return readpast.QueueInfos(stats, paused), nil
}
