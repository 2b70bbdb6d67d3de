package postgres_test

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/readpast/readpast/postgres"
)

// TestExplainListByTag prints the plan and timing of a listing by tag on
// 1.2 million jobs (1 million finished, 200,000 live; every job has one of
// 100 common tags, one in a thousand also a rare one), for
// docs/architecture.md. It takes a minute, so it runs only with
// READPAST_EXPLAIN_TAGS=1.
func TestExplainListByTag(t *testing.T) {
	if os.Getenv("READPAST_EXPLAIN_TAGS") == "" {
		t.Skip("set READPAST_EXPLAIN_TAGS=1 to measure")
	}
	s := newStore(t)
	defer s.Close()
	ctx := context.Background()
	for _, q := range []string{
		`INSERT INTO readpast_jobs_history (id, queue, kind, payload, priority, run_at, state, attempt, max_attempts,
		     created_at, finished_at, errors, tags)
		 SELECT i, 'q' || (i % 10), 'k', '{}', 0, now(), 'succeeded', 1, 25, now(), now(), '[]',
		        CASE WHEN i % 1000 = 0 THEN ARRAY['t' || (i % 100), 'rare'] ELSE ARRAY['t' || (i % 100)] END
		 FROM generate_series(1, 1000000) i`,
		`SELECT setval('readpast_job_id_seq', 1000000)`,
		`INSERT INTO readpast_jobs (queue, kind, payload, max_attempts, tags)
		 SELECT 'q' || (i % 10), 'k', '{}', 25,
		        CASE WHEN i % 1000 = 0 THEN ARRAY['t' || (i % 100), 'rare'] ELSE ARRAY['t' || (i % 100)] END
		 FROM generate_series(1, 200000) i`,
		`INSERT INTO readpast_job_tags (tag, job_id)
		 SELECT t, id FROM (SELECT id, tags FROM readpast_jobs UNION ALL SELECT id, tags FROM readpast_jobs_history) j,
		      unnest(j.tags) t`,
		`VACUUM ANALYZE readpast_jobs, readpast_jobs_history, readpast_job_tags`,
	} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, queue, tag string
		before           int64
	}{
		{"common tag, first page", "", "t7", math.MaxInt64},
		{"rare tag, first page", "", "rare", math.MaxInt64},
		{"rare tag and a queue", "q0", "rare", math.MaxInt64},
		{"common tag, deep page", "", "t7", 300000},
	} {
		rows, err := s.Pool().Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+postgres.ListTagSQL, c.queue, "", "", "", c.before, 101, c.tag)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		t.Logf("%s:\n%s", c.name, strings.Join(plan, "\n"))
	}
}
