package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/readpast/readpast"
)

var _ readpast.SQLTxStore = (*Store)(nil)

// EnqueueSQLTx inserts jobs inside the caller's transaction tx, which must
// be a transaction on s.DB(): the jobs exist if and only if tx commits. It
// validates and returns the jobs as Enqueue does (readpast.SQLTxStore).
//
// Subscribers are woken once tx has ended (storedInTx), so a claim they
// start sees the jobs if tx committed. There is no retry on SQLITE_BUSY
// here: the caller owns the transaction.
func (s *Store) EnqueueSQLTx(ctx context.Context, tx *sql.Tx, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("sqlite: EnqueueSQLTx: nil transaction")
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	norm, err := normalizeJobs(jobs, s.now())
	if err != nil {
		return nil, err
	}
	out, err := enqueueIn(ctx, tx, norm, s.now())
	if err != nil {
		return nil, fmt.Errorf("sqlite: enqueue: %w", err)
	}
	s.storedInTx(out)
	return out, nil
}

// CompleteSQLTx finishes a running job as succeeded inside the caller's
// transaction tx (on s.DB()), so the completion stands if and only if tx
// commits (readpast.SQLTxStore). It returns nil, readpast.ErrStaleToken or
// readpast.ErrNotFound as Complete does for one entry, a
// *readpast.FieldError (nothing done) when readpast.CheckResult rejects
// the result, or another error when the statement failed (then roll tx
// back).
func (s *Store) CompleteSQLTx(ctx context.Context, tx *sql.Tx, c readpast.Completion) error {
	if tx == nil {
		return errors.New("sqlite: CompleteSQLTx: nil transaction")
	}
	if err := readpast.CheckResult(c.Result); err != nil {
		return err
	}
	res, wake, err := completeIn(ctx, tx, []readpast.Completion{c}, s.now())
	if err != nil {
		return fmt.Errorf("sqlite: complete: %w", err)
	}
	s.announceOnTxEnd(wake)
	return res[0]
}

// storedInTx wakes the subscribers once the caller's transaction that
// wrote jobs out has ended (announceOnTxEnd), and sets the alarms of those
// due later at once: if tx commits; a spurious alarm costs a probe, and
// one that fires before the commit is covered by the wake-up at its end.
func (s *Store) storedInTx(out []*readpast.Job) {
	s.announceOnTxEnd(wakeup{now: true})
	s.dueLater(out)
}

// announceOnTxEnd wakes the subscribers as w says once the caller's
// transaction on the write pool's one connection has ended, that is once
// the connection is free again. Woken earlier, a claim would find
// nothing: its read-only probe does not wait for the write transaction,
// and sees only what is committed; so would an alarm for a mark that
// came due before the commit (it fires at once instead). If the store
// closes first, no one is woken. A w that asks for nothing starts nothing.
func (s *Store) announceOnTxEnd(w wakeup) {
	if !w.now && len(w.later) == 0 {
		return
	}
	go func() {
		c, err := s.write.Conn(context.Background())
		if err != nil {
			return // the store closed
		}
		c.Close()
		s.announce(w)
	}()
}
