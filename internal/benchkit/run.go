package benchkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Scenario is one named measurement.
type Scenario struct {
	// Name is what --scenarios selects.
	Name string
	Run  func(ctx context.Context, sys System, o Options) (Result, error)
}

// Scenarios are the measurements of issue 11, in the order they run.
var Scenarios = []Scenario{
	{"insert", func(ctx context.Context, s System, o Options) (Result, error) { return Insert(ctx, s, o, 1000) }},
	{"insert-100k", func(ctx context.Context, s System, o Options) (Result, error) {
		return Insert(ctx, s, o, o.n(100_000))
	}},
	{"drain-100", func(ctx context.Context, s System, o Options) (Result, error) { return Drain(ctx, s, o, 100) }},
	{"drain-1000", func(ctx context.Context, s System, o Options) (Result, error) { return Drain(ctx, s, o, 1000) }},
	{"drain-2000", func(ctx context.Context, s System, o Options) (Result, error) { return Drain(ctx, s, o, 2000) }},
	{"batches", func(ctx context.Context, s System, o Options) (Result, error) { return Flat(ctx, s, o, 100, 2, 1000) }},
	{"single", func(ctx context.Context, s System, o Options) (Result, error) { return Flat(ctx, s, o, 1, 8, 1000) }},
	{"paced", func(ctx context.Context, s System, o Options) (Result, error) {
		return Paced(ctx, s, o, 10_000, 1000, false)
	}},
	{"paced-held", func(ctx context.Context, s System, o Options) (Result, error) {
		return Paced(ctx, s, o, 10_000, 1000, true)
	}},
	{"history-1m", func(ctx context.Context, s System, o Options) (Result, error) {
		return LargeHistory(ctx, s, o, 1_000_000)
	}},
	{"history", func(ctx context.Context, s System, o Options) (Result, error) {
		return LargeHistory(ctx, s, o, 5_000_000)
	}},
	{"backlog-100k", func(ctx context.Context, s System, o Options) (Result, error) {
		return LargeBacklog(ctx, s, o, 100_000)
	}},
	{"backlog", func(ctx context.Context, s System, o Options) (Result, error) {
		return LargeBacklog(ctx, s, o, 1_000_000)
	}},
	{"paused-1000", func(ctx context.Context, s System, o Options) (Result, error) {
		return PausedQueues(ctx, s, o, 1000)
	}},
	{"groups", Groups},
	{"harness", Harness},
	{"depth", func(ctx context.Context, s System, o Options) (Result, error) {
		return Depth(ctx, s, o, 5_000_000, 1_000_000)
	}},
}

// Select returns the scenarios named in the comma-separated list ("" or
// "all": every one), or an error naming an unknown one.
func Select(list string) ([]Scenario, error) {
	if list == "" || list == "all" {
		return Scenarios, nil
	}
	var out []Scenario
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, sc := range Scenarios {
			if sc.Name == name {
				out = append(out, sc)
				found = true
			}
		}
		if !found {
			var names []string
			for _, sc := range Scenarios {
				names = append(names, sc.Name)
			}
			return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}

// Run runs each scenario on every system in turn (alternating, so that
// a drift of the machine shows in both), rounds times, and returns every
// result in run order. A scenario that does not apply to a system is
// left out; any other error stops the run.
func Run(ctx context.Context, systems []System, scenarios []Scenario, rounds int, o Options) ([]Result, error) {
	var out []Result
	for _, sc := range scenarios {
		for round := range max(1, rounds) {
			for _, sys := range inTurn(systems, round) {
				res, err := sc.Run(ctx, sys, o)
				if errors.Is(err, ErrNotApplicable) {
					continue
				}
				if err != nil {
					return out, fmt.Errorf("%s on %s: %w", sc.Name, sys.Name(), err)
				}
				if rounds > 1 {
					res.Scenario += fmt.Sprintf(" #%d", round+1)
				}
				out = append(out, res)
			}
		}
	}
	return out, nil
}

// inTurn is the order in which the systems run in round: reversed every
// other round, so that what one run leaves behind on a shared server (WAL
// to recycle or to create, a checkpoint under way, dirty pages) falls on
// each system as often, not always on the one that runs second, nor the
// first run of a fresh server always on the first system.
func inTurn[S any](systems []S, round int) []S {
	if round%2 == 0 {
		return systems
	}
	out := slices.Clone(systems)
	slices.Reverse(out)
	return out
}

// WriteTable prints results as a table, one row each.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tsystem\tjobs\tseconds\tper second\tp50 ms\tp99 ms\textra\t")
	for _, r := range results {
		var extra []string
		for k, v := range r.Extra {
			extra = append(extra, fmt.Sprintf("%s=%.3g", k, v))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%.0f\t%s\t%s\t%s\t\n", r.Scenario, r.System, r.Jobs, r.Seconds, r.PerSec,
			ms(r.P50Ms), ms(r.P99Ms), strings.Join(extra, " "))
	}
	return tw.Flush()
}

func ms(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}
