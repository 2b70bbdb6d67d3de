package main

import (
	"context"
	"fmt"
	"io"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// runJobs runs `jobs list|show|cancel|retry`.
func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: readpast jobs list|show|cancel|retry [flags]")
		return usagef("missing action")
	}
	switch args[0] {
	case "list":
		return runJobsList(ctx, args[1:], stdout, stderr)
	case "show", "cancel", "retry":
		return runJobsOne(ctx, args[0], args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, "Usage: readpast jobs list|show|cancel|retry [flags]")
		return nil
	}
	return usagef("unknown action %q: want list, show, cancel or retry", args[0])
}

// runJobsList lists jobs, newest first, one page at a time.
func runJobsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("jobs list", "jobs list [flags]", stderr)
	dbURL := dbFlag(fs)
	queue := fs.String("queue", "", "only jobs of this queue")
	state := fs.String("state", "", "only jobs in this state: pending, running, succeeded, failed or cancelled")
	kind := fs.String("kind", "", "only jobs of this kind")
	group := fs.String("group", "", "only jobs of this group")
	limit := fs.Int("limit", 100, "most jobs to list (1 to 1000)")
	cursor := fs.String("cursor", "", "continue after a previous page (its next cursor)")
	asJSON := fs.Bool("json", false, `print JSON: {"jobs": [...], "next_cursor": ...}`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *limit < 1 {
		return usagef("--limit must be between 1 and 1000")
	}
	p, err := readpast.ListParams{
		Queue: *queue, State: readpast.JobState(*state), Kind: *kind, Group: *group,
		Limit: *limit, Cursor: *cursor,
	}.Normalize()
	if err != nil {
		return usageError{err}
	}

	store, err := openStore(ctx, databaseURL(*dbURL), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	res, err := store.List(ctx, p)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if *asJSON {
		out := struct {
			Jobs       []httpapi.Job `json:"jobs"`
			NextCursor *string       `json:"next_cursor"`
		}{Jobs: httpapi.NewJobs(res.Jobs)}
		if res.Next != "" {
			out.NextCursor = &res.Next
		}
		return writeJSON(stdout, out)
	}
	if err := printJobs(stdout, res.Jobs); err != nil {
		return err
	}
	if res.Next != "" {
		fmt.Fprintf(stderr, "more: --cursor %s\n", res.Next)
	}
	return nil
}

// runJobsOne runs show, cancel or retry on one job id.
func runJobsOne(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("jobs "+action, "jobs "+action+" ID [flags]", stderr)
	dbURL := dbFlag(fs)
	asJSON := fs.Bool("json", false, "print the job as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usagef("want exactly one job id")
	}
	id, err := parseJobID(pos[0])
	if err != nil {
		return err
	}

	store, err := openStore(ctx, databaseURL(*dbURL), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	var job *readpast.Job
	switch action {
	case "show":
		job, err = store.Get(ctx, id)
	case "cancel":
		job, err = store.Cancel(ctx, id)
	case "retry":
		job, err = store.Retry(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("%s job %d: %w", action, id, err)
	}
	if *asJSON {
		return writeJSON(stdout, httpapi.NewJob(job))
	}
	return printJob(stdout, job)
}
