package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/google/uuid"

	"github.com/readpast/readpast"
)

// EnqueueSQLTx is EnqueueTx for database/sql users. The *sql.DB must use
// pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib), which passes
// the statement's array parameters through.
func (s *Store) EnqueueSQLTx(ctx context.Context, tx *sql.Tx, jobs []readpast.EnqueueParams) ([]*readpast.Job, error) {
	if tx == nil {
		return nil, errors.New("postgres: EnqueueSQLTx: nil transaction")
	}
	defer s.claimFrom.ahead() // it may make jobs pending ahead of a position (claimfrom.go)
	if len(jobs) == 0 {
		return nil, nil
	}
	if anyKey(jobs) {
		return enqueueKeyedOp(ctx, sqlSource{tx}, jobs)
	}
	cols, err := newEnqueueCols(jobs, nil)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, enqueueSQL, cols.insertArgs(everyone())...)
	if err != nil {
		return nil, opErr("enqueue", err)
	}
	defer rows.Close()
	out, err := scanJobs(rows)
	if err != nil {
		return nil, opErr("enqueue", err)
	}
	cols.setTraceContexts(out)
	return out, nil
}

// CompleteSQLTx is CompleteTx for database/sql users (pgx's stdlib driver).
func (s *Store) CompleteSQLTx(ctx context.Context, tx *sql.Tx, c readpast.Completion) error {
	if tx == nil {
		return errors.New("postgres: CompleteSQLTx: nil transaction")
	}
	if err := readpast.CheckResult(c.Result); err != nil {
		return err
	}
	tok, ok := canonToken(c.Token)
	if !ok {
		return s.staleOrMissing(ctx, c.ID)
	}
	var result *string
	if len(c.Result) > 0 {
		r := string(c.Result)
		result = &r
	}
	var (
		id            int64
		token         string
		parent, freed bool
	)
	// The statement notifies for the slots it frees: the store does not
	// see the caller's commit.
	err := tx.QueryRowContext(ctx, completeSQL, []int64{c.ID}, []string{tok}, []*string{result}, true).Scan(&id, &token, &parent, &freed)
	if errors.Is(err, sql.ErrNoRows) {
		// Explain from outside the caller's transaction: the job's state
		// as others committed it.
		errs := []error{nil}
		var b batch
		b.add(0, c.ID, uuid.MustParse(tok)) // canonical: well-formed
		if err := explain(ctx, s.pool, b, nil, errs, true); err != nil {
			return opErr("complete", err)
		}
		return errs[0]
	}
	if err != nil {
		return opErr("complete", err)
	}
	if parent {
		s.pendingAgain() // if tx commits; a spurious wake costs a claim
	}
	return nil
}
