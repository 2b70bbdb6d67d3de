package typescript_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/internal/testbin"
)

// BenchmarkDrain runs bench/drain.mjs against `readpast serve` on SQLite
// and on PostgreSQL (a throwaway server): one Node worker process drains a
// backlog of no-op jobs; jobs/s is the drain rate. The backlog size and
// the worker's concurrency come from READPAST_DRAIN_JOBS (default 20000)
// and READPAST_DRAIN_CONCURRENCY (default 200):
//
//	go test -run '^$' -bench Drain -benchtime 1x ./clients/typescript/
func BenchmarkDrain(b *testing.B) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("node not found")
	}
	tsPkg.Build(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	jobs := envOr("READPAST_DRAIN_JOBS", "20000")
	conc := envOr("READPAST_DRAIN_CONCURRENCY", "200")
	for _, store := range []string{"sqlite", "postgres"} {
		b.Run(store, func(b *testing.B) {
			opts := testbin.ServeOptions{}
			if store == "postgres" {
				opts.DatabaseURL = pgtest.ServerFor(b, pgtest.Options{}).URL("postgres")
			}
			srv := readpastBin.Serve(b, opts)
			var rate float64
			for range b.N {
				cmd := exec.CommandContext(ctx, node, "bench/drain.mjs", "--jobs", jobs, "--concurrency", conc)
				cmd.Env = append(testbin.Environ(), "READPAST_URL="+srv.URL, "READPAST_TOKEN="+srv.Token)
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("node bench/drain.mjs: %v\n%s", err, out)
				}
				var r struct {
					JobsPerSecond float64 `json:"jobs_per_second"`
				}
				if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &r); err != nil {
					b.Fatalf("drain.mjs printed %q: %v", out, err)
				}
				b.Logf("%s: %s", store, strings.TrimSpace(string(out)))
				rate = r.JobsPerSecond
			}
			b.ReportMetric(rate, "jobs/s")
		})
	}
}

// envOr returns the environment variable name, or def when it is not a
// positive integer.
func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return v
		}
	}
	return def
}
