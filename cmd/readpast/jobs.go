package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// jobsUsage is the synopsis of `readpast jobs`.
const jobsUsage = "Usage: readpast jobs list|show|cancel|retry|run|delete|bulk [flags]"

// runJobs runs `jobs list|show|cancel|retry|run|delete|bulk`.
func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing action: want list, show, cancel, retry, run, delete or bulk")
	}
	switch args[0] {
	case "list":
		return runJobsList(ctx, args[1:], stdout, stderr)
	case "show", "cancel", "retry", "run":
		return runJobsOne(ctx, args[0], args[1:], stdout, stderr)
	case "delete":
		return runJobsDelete(ctx, args[1:], stdout)
	case "bulk":
		return runJobsBulk(ctx, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, jobsUsage)
		return nil
	}
	return usagef("unknown action %q: want list, show, cancel, retry, run, delete or bulk", args[0])
}

// runJobsList lists jobs, newest first, one page at a time.
func runJobsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("jobs list", "jobs list [flags]", stdout)
	tf := addTargetFlags(fs)
	queue := fs.String("queue", "", "only jobs of this queue")
	state := fs.String("state", "", "only jobs in this state: blocked, pending, running, succeeded, failed or cancelled")
	kind := fs.String("kind", "", "only jobs of this kind")
	group := fs.String("group", "", "only jobs of this group")
	tag := fs.String("tag", "", "only jobs carrying this tag")
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
		Queue: *queue, State: readpast.JobState(*state), Kind: *kind, Group: *group, Tag: *tag,
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

// parseOneJobID parses args with fs, wanting exactly one argument: a job
// id.
func parseOneJobID(fs *flagSet, args []string) (int64, error) {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return 0, err
	}
	if len(pos) != 1 {
		return 0, usagef("want exactly one job id")
	}
	return parseJobID(pos[0])
}

// runJobsOne runs show, cancel, retry or run (make a pending job due now)
// on one job id. show also lists the job's parents and children, if it
// has any (at most showRelatives of each).
func runJobsOne(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("jobs "+action, "jobs "+action+" ID [flags]", stdout)
	tf := addTargetFlags(fs)
	jsonHelp := "print the job as JSON"
	if action == "show" {
		jsonHelp = `print the job as JSON, with "parents" and "children" ({"edge": ..., "job": ...}) when it has edges`
	}
	asJSON := fs.Bool("json", false, jsonHelp)
	id, err := parseOneJobID(fs, args)
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
	if action == "show" {
		shown, err := withRelatives(ctx, b, job, stderr)
		if err != nil {
			return describeJobError(action, id, err)
		}
		if *asJSON {
			return writeJSON(stdout, shown)
		}
		return printShown(stdout, shown)
	}
	if *asJSON {
		return writeJSON(stdout, job)
	}
	return printJob(stdout, job)
}

// runJobsDelete deletes one finished job.
func runJobsDelete(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("jobs delete", "jobs delete ID [flags]", stdout)
	tf := addTargetFlags(fs)
	id, err := parseOneJobID(fs, args)
	if err != nil {
		return err
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.deleteJob(ctx, id); err != nil {
		return describeJobError("delete", id, err)
	}
	fmt.Fprintf(stdout, "deleted job %d\n", id)
	return nil
}

// runJobsBulk runs `jobs bulk retry|cancel|delete` on the jobs a filter
// matches, and prints how many it changed. When it skipped jobs that other
// transactions held, it names them and fails (exit status 1), so that a
// script does not take a partial action for a whole one.
func runJobsBulk(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || readpast.BulkStates(args[0]) == nil {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(stdout, "Usage: readpast jobs bulk retry|cancel|delete --queue Q --kind K --state S --tag T --group G [flags]")
			return nil
		}
		return usagef("want an action: retry, cancel or delete")
	}
	action := args[0]
	fs := newFlagSet("jobs bulk "+action, "jobs bulk "+action+" [filter flags] [flags]", stdout)
	tf := addTargetFlags(fs)
	queue := fs.String("queue", "", "only jobs of this queue")
	kind := fs.String("kind", "", "only jobs of this kind")
	state := fs.String("state", "", "only jobs in this state (retry: failed or cancelled; cancel: blocked, pending or running; delete: succeeded, failed or cancelled)")
	tag := fs.String("tag", "", "only jobs carrying this tag")
	group := fs.String("group", "", "only jobs of this group")
	asJSON := fs.Bool("json", false, `print {"count": n, "skipped": [ids]}`)
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	f, err := readpast.JobFilter{Queue: *queue, Kind: *kind, State: readpast.JobState(*state), Tag: *tag, Group: *group}.Normalize(action)
	if err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) && fe.Field == "filter" {
			return usagef("give at least one of --queue, --kind, --state, --tag, --group (a bulk action never applies to every job by default)")
		}
		return usageError{err}
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	n, err := b.bulk(ctx, action, f)
	skipped := []int64{}
	var se *readpast.SkippedError
	if errors.As(err, &se) {
		skipped = se.IDs
	} else if err != nil {
		return fmt.Errorf("bulk %s: %w", action, err)
	}
	if *asJSON {
		if err := writeJSON(stdout, httpapi.BulkResponse{Count: n, Skipped: skipped}); err != nil {
			return err
		}
	} else {
		past := map[string]string{"retry": "retried", "cancel": "cancelled", "delete": "deleted"}[action]
		fmt.Fprintf(stdout, "%s %d jobs\n", past, n)
	}
	if len(skipped) > 0 {
		return fmt.Errorf("bulk %s: skipped %d jobs that other transactions held (run it again to act on them): %v", action, len(skipped), skipped)
	}
	return nil
}
