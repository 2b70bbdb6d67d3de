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
// full groups. Each iteration claims, then (untimed) releases what it took.
//
//	go test -run '^$' -bench ClaimGroupsAtScale -benchtime 50x ./postgres/ -args -groups.explain
func BenchmarkClaimGroupsAtScale(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	defer s.Close()
	start := time.Now()
	// Bulk-load the jobs (through the store, so ready marks exist as in
	// production), in batches, interleaving groups as a live system would.
	const batch = 5000
	var ps []readpast.EnqueueParams
	for j := range *scaleJobs {
		for g := range *scaleGroups {
			ps = append(ps, readpast.EnqueueParams{Kind: "k", Group: fmt.Sprint("g", g), Payload: []byte(fmt.Sprintf(`{"j":%d}`, j))})
			if len(ps) == batch {
				if _, err := s.Enqueue(ctx, ps); err != nil {
					b.Fatal(err)
				}
				ps = ps[:0]
			}
		}
	}
	if len(ps) > 0 {
		if _, err := s.Enqueue(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	// Make all but scaleFree groups busy: claim their heads.
	busy := *scaleGroups - *scaleFree
	for taken := 0; taken < busy; {
		got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "setup", Limit: min(1000, busy-taken), Lease: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) == 0 {
			b.Fatalf("setup stalled at %d busy groups", taken)
		}
		taken += len(got)
	}
	if _, err := s.Pool().Exec(ctx, "VACUUM ANALYZE readpast_jobs, readpast_groups, readpast_group_ready"); err != nil {
		b.Fatal(err)
	}
	b.Logf("setup: %d groups x %d jobs, %d busy, in %v", *scaleGroups, *scaleJobs, busy, time.Since(start).Round(time.Millisecond))
	if *scaleplan {
		fmt.Fprintln(os.Stderr, explainClaim(b, s, *scaleLimit))
	}
	p := readpast.ClaimParams{Worker: "bench", Limit: *scaleLimit, Lease: time.Hour}
	b.ResetTimer()
	for range b.N {
		got, err := s.Claim(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(got) != *scaleFree {
			b.Fatalf("claimed %d jobs, want one of each of the %d free groups", len(got), *scaleFree)
		}
		for _, j := range got {
			if err := s.Release(ctx, j.ID, j.Token); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/claim")
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
