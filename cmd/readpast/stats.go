package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/readpast/readpast"
)

// runStats prints job counts per queue and state: a table with a row per
// queue, a column per state, one saying whether the queue is paused and a
// total row, or with --json the body of GET /v1/stats.
func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stats", "stats [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, `print JSON: {"queues": {QUEUE: {STATE: COUNT}}, "totals": {STATE: COUNT}, "paused": [QUEUE]}`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	b, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer b.close()
	res, err := b.stats(ctx)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	if *asJSON {
		return writeJSON(stdout, res)
	}

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "QUEUE")
	for _, s := range readpast.AllStates {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(s)))
	}
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
