package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/readpast/readpast"
)

// Claim takes up to p.Limit jobs in one statement (sql/claim.sql) that
// takes rows SKIP LOCKED and ends any lock wait PostgreSQL makes it wait
// after 10 ms, failing with nothing done; Claim then tries again, up to
// lockWaitTries in all. Every job of the claim carries the same fresh
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
	defer s.out.enter()() // Close waits for the announcement of what it commits
	began := time.Now()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, opErr("claim", err)
	}
	pid := conn.Conn().PgConn().PID()
	token := uuid.NewString()
	st := s.claimFrom.start(p.Queues, p.Limit, time.Now())
	var (
		jobs  []*readpast.Job
		notes claimNotes
	)
	// A claim that ended a lock wait did nothing: it claims again, with
	// the same token on the same connection.
	err = retryLockWait(ctx, func() (err error) {
		if s.claimInTx.Load() {
			jobs, notes, err = claimReadCommitted(ctx, conn, s.routineMode, p, token, st.args()...)
			return err
		}
		jobs, notes, err = claim(ctx, conn, s.routineMode, claimRoutine.call, p, token, st.args()...)
		if notReadCommitted(err) {
			// The session's default isolation is stricter than READ
			// COMMITTED (the routine refused before doing anything):
			// from now on every claim runs in a transaction of its own.
			s.claimInTx.Store(true)
			jobs, notes, err = claimReadCommitted(ctx, conn, s.routineMode, p, token, st.args()...)
		}
		return err
	})
	conn.Release()
	if err == nil && notes.due != "" {
		s.announceDue(notes.due) // committed: the routine ran on its own, or in a transaction that ended
	}
	if err == nil && len(jobs) < p.Limit && notes.passed != 0 {
		s.claimedKeys(notes.passed)
	}
	s.claimFrom.claimed(st, jobs)
	s.dropIdleAfter(ctx, began, err)
	if err != nil && outcomeUnknown(err) {
		uerr := s.settleClaim(ctx, pid, token, p.Lease)
		// It may have committed and left keys out of tokens, whose next
		// starts only its answer listed.
		s.announceUpcoming()
		if uerr != nil {
			return nil, fmt.Errorf("%w (and settling the claim failed, so its jobs, if it took any, wait for their leases to expire: %v)", err, uerr)
		}
	}
	return jobs, err
}

// claim runs stmt, sql/claim.sql or its routine (claimRoutine.call, whose
// two more arguments say where it starts, claimfrom.go), on q
// in mode (Store.hotMode): the unnamed statement, which PostgreSQL plans
// with the actual parameters every time, or the routine's call, whose
// statement each server session plans once (see routines.go). notes are
// what the claim said beside its jobs, which the caller acts on once the
// claim has committed: the "due:" payload of the keys it left out of
// tokens (Store.announceDue), and the first keyed job it passed over
// (Store.claimedKeys).
func claim(ctx context.Context, q querier, mode pgx.QueryExecMode, stmt string, p readpast.ClaimParams, token string, more ...any) (jobs []*readpast.Job, notes claimNotes, _ error) {
	args := append([]any{mode, p.Queues, p.Worker, int64(p.Limit), p.Lease.Microseconds(), token}, more...)
	rows, err := q.Query(ctx, stmt, args...)
	if err != nil {
		return nil, claimNotes{}, opErr("claim", err)
	}
	defer rows.Close()
	jobs, notes.due, notes.passed, err = scanClaimed(rows, p, token)
	if err != nil {
		return nil, claimNotes{}, opErr("claim", err)
	}
	return jobs, notes, nil
}

// claimNotes is what a claim says beside its jobs (claim_result_due).
type claimNotes struct {
	due    string // the "due:" payload of the keys it left out of tokens, or ""
	passed int64  // the first keyed job it passed over that may be claimable now, or 0 (claimmore.go)
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
	jobs, notes, err := claim(ctx, tx, pgx.QueryExecModeDescribeExec, claimSQL, p, uuid.NewString())
	if err == nil && notes.due != "" {
		// No store to announce it: tx does, when it commits.
		if _, err := tx.Exec(ctx, notifyPayloadSQL, notes.due); err != nil {
			return nil, opErr("claim", err)
		}
	}
	return jobs, err
}
