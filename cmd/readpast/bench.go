package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"

	"github.com/readpast/readpast/internal/benchkit"
)

const benchSynopsis = `bench [--database-url URL] [--scenarios LIST] [--scale X] [--rounds N] [--json] [--cpuprofile FILE]

Runs the benchmark scenarios (docs/benchmarks.md) against readpast and prints
a table (or JSON). Without --database-url it uses a new SQLite file in a
temporary folder. A given database must be one for benchmarks only: every
scenario deletes all jobs, and bench refuses a database that holds any; it
leaves the database empty when it is done.`

// runBench runs `readpast bench`.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", benchSynopsis, stdout)
	db := fs.String("database-url", "", "a postgres:// URL or a SQLite file path, for benchmarks only (default: a new SQLite file in a temporary folder)")
	list := fs.String("scenarios", "all", "comma-separated scenarios: "+scenarioNames())
	scale := fs.Float64("scale", 0.1, "size of the scenarios: 1 is the full size of docs/benchmarks.md (minutes each), 0.1 a quick look")
	rounds := fs.Int("rounds", 1, "how many times to run each scenario")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (the client side) to `FILE`, for go tool pprof")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *scale <= 0 || *scale > 10 {
		return usagef("--scale must be above 0 and at most 10")
	}
	if *rounds < 1 || *rounds > 100 {
		return usagef("--rounds must be between 1 and 100")
	}
	scenarios, err := benchkit.Select(*list)
	if err != nil {
		return usageError{err}
	}
	url := *db
	if url == "" {
		dir, err := os.MkdirTemp("", "readpast-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		url = filepath.Join(dir, "bench.db")
	}
	var sys *benchkit.Readpast
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		sys, err = benchkit.ReadpastPostgres(ctx, url)
	} else {
		sys, err = benchkit.ReadpastSQLite(ctx, url)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", dbArg(url), err)
	}
	defer sys.Close()
	if *db != "" {
		if err := refuseJobs(ctx, sys, url); err != nil {
			return err
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("start the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	o := benchkit.Options{Scale: *scale}
	if isTerminal(stderr) && !*asJSON {
		o.Progress = stderr
	}
	results, err := benchkit.Run(ctx, []benchkit.System{sys}, scenarios, *rounds, o)
	// Leave the database as bench found it, empty, so it can run again.
	if rerr := sys.Reset(context.WithoutCancel(ctx)); rerr != nil {
		err = errors.Join(err, fmt.Errorf("delete the benchmark's jobs: %w", rerr))
	}
	if *asJSON {
		if werr := writeJSON(stdout, results); werr != nil {
			return werr
		}
	} else if werr := benchkit.WriteTable(stdout, results); werr != nil {
		return werr
	}
	return err
}

// refuseJobs fails unless the database at url holds no job at all: the
// scenarios delete every job.
func refuseJobs(ctx context.Context, sys *benchkit.Readpast, url string) error {
	st, err := sys.Store().Stats(ctx)
	if err != nil {
		return err
	}
	var n int64
	for _, q := range st {
		n += q.Count
	}
	if n > 0 {
		return fmt.Errorf("%s holds %d jobs; bench deletes every job, so give it a database of its own", dbArg(url), n)
	}
	return nil
}

func scenarioNames() string {
	var names []string
	for _, sc := range benchkit.Scenarios {
		names = append(names, sc.Name)
	}
	return strings.Join(names, ", ")
}
