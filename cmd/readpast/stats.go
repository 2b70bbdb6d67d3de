package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// runStats prints job counts per queue and state: a table with a row per
// queue, a column per state, one saying whether the queue is paused and a
// total row, or with --json the body of GET /v1/stats.
func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runRead(ctx, "stats", `print JSON: {"queues": {QUEUE: {STATE: COUNT}}, "totals": {STATE: COUNT}, "paused": [QUEUE]}`,
		args, stdout, backend.stats, printStats)
}

// printStats prints res as a table.
func printStats(stdout io.Writer, res httpapi.StatsResponse) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "QUEUE")
	stateColumns(tw)
	fmt.Fprintln(tw, "\tPAUSED")
	queues := slices.Clone(res.Paused)
	for q := range res.Queues {
		queues = append(queues, q)
	}
	slices.Sort(queues)
	row := func(name string, counts map[readpast.JobState]int64, paused string) {
		fmt.Fprint(tw, name)
		for _, s := range readpast.AllStates {
			fmt.Fprintf(tw, "\t%d", counts[s])
		}
		fmt.Fprintf(tw, "\t%s\n", paused)
	}
	for _, q := range slices.Compact(queues) {
		paused := "no"
		if slices.Contains(res.Paused, q) {
			paused = "yes"
		}
		row(q, res.Queues[q], paused)
	}
	row("(all)", res.Totals, "")
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
