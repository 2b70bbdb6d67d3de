package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A statement that takes rows SKIP LOCKED can still wait for a row lock:
// PostgreSQL, locking a row version another transaction has just replaced,
// locks the newer versions too and waits for whoever holds them, whatever
// the wait policy. The statements that must not hold rows while waiting (a
// claim, a fold of freed slots, PruneGroups, a limit change under the
// limits' lock) end such a wait after lockWaitTimeout, with nothing done.

// lockWaitTimeout bounds the lock waits of the statements that take key
// rows SKIP LOCKED and must not hold them waiting, as the claim routine's
// lock_timeout (sql/routines/claim.sql) bounds a claim's.
const lockWaitTimeout = "10ms"

// lockWaitTries is how many tries of one call whose statement ended a lock
// wait (lockWaitEnded) follow each other at once. Where key rows are
// replaced often and the machine is loaded, a holder descheduled for more
// than lockWaitTimeout can end a few tries running; the call then tries
// again after a pause, from lockWaitPause up to lockWaitPauseMax, while it
// has run for less than lockWaitBudget.
const (
	lockWaitTries    = 5
	lockWaitPause    = time.Millisecond
	lockWaitPauseMax = 16 * time.Millisecond
	lockWaitBudget   = 500 * time.Millisecond
)

var setLockTimeoutSQL = mustStatement("set_lock_timeout")

// setLockTimeout sets tx's lock_timeout to d (as "10ms") for the
// statements after it.
func setLockTimeout(ctx context.Context, tx pgx.Tx, d string) error {
	_, err := tx.Exec(ctx, setLockTimeoutSQL, d)
	return err
}

// lockWaitEnded reports whether err is a statement that ended a wait for
// a row lock and did nothing: its lock_timeout, or a deadlock.
func lockWaitEnded(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}

// retryLockWait runs f, and again from a newer snapshot while it ends a
// lock wait (lockWaitEnded) and ctx lasts: lockWaitTries times at once,
// then after pauses that double from lockWaitPause to lockWaitPauseMax,
// while less than lockWaitBudget has passed since the first try. It
// returns f's last error.
func retryLockWait(ctx context.Context, f func() error) error {
	began := time.Now()
	pause := lockWaitPause
	for try := 1; ; try++ {
		err := f()
		if !lockWaitEnded(err) || ctx.Err() != nil {
			return err
		}
		if try < lockWaitTries {
			continue
		}
		if time.Since(began)+pause > lockWaitBudget {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, lockWaitPauseMax)
	}
}
