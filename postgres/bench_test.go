package postgres_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/storetest"
)

var (
	scaleGroups = flag.Int("groups.n", 100000, "backlogged groups for BenchmarkClaimGroupsAtScale")
	scaleFree   = flag.Int("groups.free", 100, "of them, groups left free (the rest are running a job)")
	scaleJobs   = flag.Int("groups.jobs", 3, "pending jobs per group")
	scaleLimit  = flag.Int("groups.limit", 1000, "claim limit")
	scaleplan   = flag.Bool("groups.explain", false, "log EXPLAIN (ANALYZE, BUFFERS) of one claim")
)

// BenchmarkClaimGroupsAtScale: -groups.n groups with -groups.jobs pending
// jobs each, all but -groups.free of them running a job, so each claim of
// up to -groups.limit jobs finds -groups.free claimable heads among many
// full groups (storetest.BenchClaimGroupsAtScale).
//
//	go test -run '^$' -bench ClaimGroupsAtScale -benchtime 50x ./postgres/ -args -groups.explain
func BenchmarkClaimGroupsAtScale(b *testing.B) {
	s := newStore(b)
	defer s.Close()
	storetest.BenchClaimGroupsAtScale(b, s, storetest.GroupsAtScale{
		Groups: *scaleGroups, JobsPerGroup: *scaleJobs, Free: *scaleFree, Limit: *scaleLimit,
		Ready: func(b *testing.B) {
			if _, err := s.Pool().Exec(context.Background(), "VACUUM ANALYZE readpast_jobs, readpast_groups, readpast_group_ready"); err != nil {
				b.Fatal(err)
			}
			if *scaleplan {
				fmt.Fprintln(os.Stderr, explainClaim(b, s, *scaleLimit))
			}
		},
	})
}

// explainClaim runs EXPLAIN (ANALYZE, BUFFERS) of one claim in a
// transaction it rolls back.
func explainClaim(b *testing.B, s *postgres.Store, limit int) string {
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+postgres.ClaimSQL, pgx.QueryExecModeDescribeExec,
		[]string{readpast.DefaultQueue}, "explain", int64(limit), time.Hour.Microseconds(), uuid.NewString())
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			b.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return "\n" + strings.Join(lines, "\n")
}

// BenchmarkEnqueueUnique: enqueue cost with and without unique keys, one
// job and batches of 100 (storetest.BenchEnqueueUnique).
//
//	go test -run '^$' -bench EnqueueUnique -benchtime 2000x ./postgres/
func BenchmarkEnqueueUnique(b *testing.B) {
	for _, size := range []int{1, 100} {
		b.Run(fmt.Sprint("batch-", size), func(b *testing.B) {
			s := newStore(b)
			defer s.Close()
			storetest.BenchEnqueueUnique(b, s, size)
		})
	}
}
