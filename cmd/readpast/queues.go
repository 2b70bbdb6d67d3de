package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// queuesUsage is the synopsis of `readpast queues`.
const queuesUsage = "Usage: readpast queues list|pause|resume [flags]"

// runQueues runs `queues list|pause|resume`; without an action it lists.
func runQueues(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return runQueuesList(ctx, args, stdout)
	}
	switch args[0] {
	case "list":
		return runQueuesList(ctx, args[1:], stdout)
	case "pause", "resume":
		return runQueuesOne(ctx, args[0], args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, queuesUsage)
		return nil
	}
	if strings.HasPrefix(args[0], "-") {
		return runQueuesList(ctx, args, stdout) // list is the default action
	}
	return usagef("unknown action %q: want list, pause or resume", args[0])
}

// runQueuesList prints every queue that has jobs or is paused: whether it
// is paused and its job counts.
func runQueuesList(ctx context.Context, args []string, stdout io.Writer) error {
	return runRead(ctx, "queues list", `print the body of GET /v1/queues: {"queues": [{"name", "paused", "paused_at", "counts"}]}`,
		args, stdout, backend.queues, printQueues)
}

// printQueues prints res as a table.
func printQueues(stdout io.Writer, res httpapi.QueuesResponse) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "QUEUE\tPAUSED")
	stateColumns(tw)
	fmt.Fprintln(tw)
	for _, q := range res.Queues {
		fmt.Fprintf(tw, "%s\t%s", q.Name, pausedSince(q))
		for _, s := range readpast.AllStates {
			fmt.Fprintf(tw, "\t%d", q.Counts[s])
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// pausedSince says whether q is paused, and since when.
func pausedSince(q httpapi.Queue) string {
	if !q.Paused {
		return "no"
	}
	if q.PausedAt == nil {
		return "yes"
	}
	return "since " + q.PausedAt.Local().Format(time.DateTime)
}

// runQueuesOne pauses or resumes one queue.
func runQueuesOne(ctx context.Context, action string, args []string, stdout io.Writer) error {
	fs := newFlagSet("queues "+action, "queues "+action+" NAME [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, "print the queue as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one queue name")
	}
	name := pos[0]
	if err := readpast.CheckQueue(name); err != nil {
		return usagef("%v", err)
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	q, err := b.queue(ctx, action, name)
	if err != nil {
		return fmt.Errorf("%s queue %q: %w", action, name, err)
	}
	if *asJSON {
		return writeJSON(stdout, q)
	}
	if q.Paused {
		fmt.Fprintf(stdout, "queue %s is paused: no worker claims its %d pending jobs until it is resumed\n", q.Name, q.Counts[readpast.StatePending])
		return nil
	}
	fmt.Fprintf(stdout, "queue %s is running: %d pending jobs\n", q.Name, q.Counts[readpast.StatePending])
	return nil
}
