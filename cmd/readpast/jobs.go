package main

import (
	"context"
	"fmt"
	"io"

	"github.com/readpast/readpast"
)

// jobsUsage is the synopsis of `readpast jobs`.
const jobsUsage = "Usage: readpast jobs list|show|cancel|retry [flags]"

// runJobs runs `jobs list|show|cancel|retry`.
func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing action: want list, show, cancel or retry")
	}
	switch args[0] {
	case "list":
		return runJobsList(ctx, args[1:], stdout, stderr)
	case "show", "cancel", "retry":
		return runJobsOne(ctx, args[0], args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, jobsUsage)
		return nil
	}
	return usagef("unknown action %q: want list, show, cancel or retry", args[0])
}

// runJobsList lists jobs, newest first, one page at a time.
func runJobsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("jobs list", "jobs list [flags]", stdout)
	tf := addTargetFlags(fs)
	queue := fs.String("queue", "", "only jobs of this queue")
	state := fs.String("state", "", "only jobs in this state: pending, running, succeeded, failed or cancelled")
	kind := fs.String("kind", "", "only jobs of this kind")
	group := fs.String("group", "", "only jobs of this group")
	limit := fs.Int("limit", 100, "most jobs to list (1 to 1000)")
	cursor := fs.String("cursor", "", "continue after a previous page (its next cursor)")
	asJSON := fs.Bool("json", false, `print JSON: {"jobs": [...], "next_cursor": ...}`)
	summary := fs.Bool("summary", false, "with --json, leave out payloads, results and errors")
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

	b, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer b.close()
	// The table shows no payloads: do not fetch them.
	page, err := b.list(ctx, p, *summary || !*asJSON)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	if *asJSON {
		return writeJSON(stdout, page)
	}
	if err := printJobs(stdout, page.Jobs); err != nil {
		return err
	}
	if page.NextCursor != nil {
		fmt.Fprintf(stderr, "more: --cursor %s\n", *page.NextCursor)
	}
	return nil
}

// runJobsOne runs show, cancel or retry on one job id.
func runJobsOne(ctx context.Context, action string, args []string, stdout io.Writer) error {
	fs := newFlagSet("jobs "+action, "jobs "+action+" ID [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, "print the job as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one job id")
	}
	id, err := parseJobID(pos[0])
	if err != nil {
		return err
	}

	b, err := tf.open(ctx, action == "show")
	if err != nil {
		return err
	}
	defer b.close()
	job, err := b.job(ctx, action, id)
	if err != nil {
		return describeJobError(action, id, err)
	}
	if *asJSON {
		return writeJSON(stdout, job)
	}
	return printJob(stdout, job)
}
