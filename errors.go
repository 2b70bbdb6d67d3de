package readpast

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNotFound: no job has that id.
	ErrNotFound = errors.New("readpast: job not found")
	// ErrStaleToken: the token is not the job's current claim (its lease
	// expired and it was re-claimed, or it already finished). Nothing changed.
	ErrStaleToken = errors.New("readpast: claim token is not current")
	// ErrInvalidState: the operation does not apply to the job's state, such
	// as cancelling a job that already succeeded. Nothing changed.
	ErrInvalidState = errors.New("readpast: job is not in a state that allows this")
	// ErrSchemaTooNew: the database was migrated by a newer readpast.
	ErrSchemaTooNew = errors.New("readpast: database schema is newer than this version")
	// ErrSchemaTooOld: the database lacks migrations this readpast needs
	// (it was never migrated, or by an older readpast); run Migrate.
	ErrSchemaTooOld = errors.New("readpast: database schema is older than this version")
	// ErrInvalid: a parameter is out of range; the error is a *FieldError.
	ErrInvalid = errors.New("readpast: invalid parameter")
	// ErrUnavailable: the database could not be reached or did not answer
	// in time (connection refused or lost, a timeout, a server shutting
	// down, a file that cannot be opened or stays locked). Trying again
	// later may work. A write that failed this way after it was sent may
	// or may not have been applied.
	ErrUnavailable = errors.New("readpast: database unavailable")
	// ErrScheduleNotFound: no schedule has that name.
	ErrScheduleNotFound = errors.New("readpast: schedule not found")
	// ErrLimitNotFound: no limit is declared for that key or template.
	ErrLimitNotFound = errors.New("readpast: limit not found")
	// ErrSkipped is returned (as a *SkippedError) by a bulk action that
	// could not act on some of the jobs it matched.
	ErrSkipped = errors.New("readpast: jobs held by other transactions were skipped")
)

// SkippedError names the jobs that a bulk action matched and did not act
// on, because other transactions held their rows for longer than the
// store waits (a caller's transaction left open around CompleteTx, for
// example). The count the action returns with it is what it did; acting
// again on the same filter, or on the IDs, picks the skipped jobs up.
type SkippedError struct {
	Action string  // the bulk action: BulkRetryAction, BulkCancelAction or BulkDeleteAction
	IDs    []int64 // the jobs skipped, in id order
}

func (e *SkippedError) Error() string {
	return fmt.Sprintf("readpast: bulk %s skipped %d jobs that other transactions held: %v", e.Action, len(e.IDs), e.IDs)
}

// Is makes errors.Is(err, ErrSkipped) true.
func (e *SkippedError) Is(target error) bool { return target == ErrSkipped }

// FieldError names the parameter that made a request invalid.
// errors.Is(err, ErrInvalid) holds for every FieldError.
type FieldError struct {
	Field   string
	Message string
}

// Error names the field and what is wrong with it.
func (e *FieldError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Message) }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}
