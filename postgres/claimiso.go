package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/readpast/readpast"
)

// claimReadCommitted runs the claim routine in a READ COMMITTED
// transaction of its own on conn: two more round trips (BEGIN and COMMIT),
// for sessions whose default isolation is stricter. Each statement of the
// routine then takes its snapshot after the one before it, which the pause
// keys need (sql/claim_queues.sql).
func claimReadCommitted(ctx context.Context, conn *pgxpool.Conn, mode pgx.QueryExecMode, p readpast.ClaimParams, token string, more ...any) (jobs []*readpast.Job, notes claimNotes, _ error) {
	err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		var err error
		jobs, notes, err = claim(ctx, tx, mode, claimRoutine.call, p, token, more...)
		return err
	})
	if err != nil {
		return nil, claimNotes{}, opErr("claim", err)
	}
	return jobs, notes, nil
}

// notReadCommitted reports whether err is the claim routine's refusal to
// run outside READ COMMITTED (SQLSTATE RP001).
func notReadCommitted(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "RP001"
}
