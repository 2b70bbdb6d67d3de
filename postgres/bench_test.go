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
	scaleplan   = flag.Bool("groups.explain", false, "log EXPLAIN (ANALYZE, BUFFERS) of the first claim and of one after the timed claims")
	scaleRated  = flag.Bool("groups.throttled", false, "half of the busy groups out of tokens (a rate of one start an hour) instead of running")
	scaleBare   = flag.Bool("groups.bare", false, "BenchmarkClaimGroupsAtScale without the store's vacuums (Tidy every second) beside the claims")
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
		Groups: *scaleGroups, JobsPerGroup: *scaleJobs, Free: *scaleFree, Limit: *scaleLimit, Throttled: *scaleRated, Bare: *scaleBare,
		Ready: func(b *testing.B) {
			if _, err := s.Pool().Exec(context.Background(), "VACUUM ANALYZE readpast_jobs, readpast_groups, readpast_group_ready"); err != nil {
				b.Fatal(err)
			}
			if *scaleplan {
				fmt.Fprintln(os.Stderr, "EXPLAIN of the first claim:", explainClaim(b, s, *scaleLimit))
			}
		},
		Done: func(b *testing.B) {
			if *scaleplan {
				fmt.Fprintln(os.Stderr, "EXPLAIN of a claim after the timed ones:", explainClaim(b, s, *scaleLimit))
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

var freesGroups = flag.Int("frees.groups", 100, "groups, and jobs a Complete, for BenchmarkCompleteFreesGroups")

// BenchmarkCompleteFreesGroups: one Complete of -frees.groups (100) jobs,
// each the running job of its own group with a backlog, so each
// completion frees a slot and the group rows' trigger (migrations/0008)
// marks the group's next job: the cost of announcing freed groups, per
// batch.
//
//	go test -run '^$' -bench CompleteFreesGroups -benchtime 300x ./postgres/
func BenchmarkCompleteFreesGroups(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	defer s.Close()
	groups := *freesGroups
	ps := make([]readpast.EnqueueParams, 0, groups*(b.N+1))
	for range b.N + 1 {
		for g := range groups {
			ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: fmt.Sprint("g", g)})
		}
	}
	for len(ps) > 0 {
		n := min(len(ps), 10000)
		if _, err := s.Enqueue(ctx, ps[:n]); err != nil {
			b.Fatal(err)
		}
		ps = ps[n:]
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE readpast_jobs, readpast_groups, readpast_group_ready"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: groups, Lease: time.Minute})
		if err != nil || len(got) != groups {
			b.Fatalf("claimed %d jobs, %v; want one of each of %d groups", len(got), err, groups)
		}
		cs := make([]readpast.Completion, len(got))
		for i, j := range got {
			cs[i] = readpast.Completion{ID: j.ID, Token: j.Token}
		}
		b.StartTimer()
		if _, err := s.Complete(ctx, cs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFinish: storetest.BenchFinish.
//
//	go test -run '^$' -bench Finish -benchtime 3x ./postgres/
func BenchmarkFinish(b *testing.B) { storetest.BenchFinish(b, newStore(b)) }

// BenchmarkKeys: what a job's later keys cost its claim and completion
// (storetest.BenchKeys).
//
//	go test -run '^$' -bench Keys -benchtime 5x ./postgres/
func BenchmarkKeys(b *testing.B) { storetest.BenchKeys(b, newStore(b)) }
