package postgres_test

import (
	"context"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
)

// deadlocks is storetest.Harness.Deadlocks for PostgreSQL: the database's
// deadlock count, after closing the store's idle connections so that
// their backends report what they saw.
func deadlocks(ctx context.Context, st readpast.Store) (int64, error) {
	pool := st.(*postgres.Store).Pool()
	pool.Reset()
	time.Sleep(200 * time.Millisecond)
	var n int64
	err := pool.QueryRow(ctx, `SELECT pg_stat_clear_snapshot(), deadlocks FROM pg_stat_database
		WHERE datname = current_database()`).Scan(nil, &n)
	return n, err
}
