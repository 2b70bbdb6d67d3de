package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// schedulesUsage is the synopsis of `readpast schedules`.
const schedulesUsage = "Usage: readpast schedules list|show|set|delete|pause|resume|run [flags]"

// runSchedules runs `schedules list|show|set|delete|pause|resume|run`, through
// a server's HTTP API or on a database directly, as the job commands do.
func runSchedules(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing action: want list, show, set, delete, pause, resume or run")
	}
	switch args[0] {
	case "list":
		return runSchedulesList(ctx, args[1:], stdout)
	case "set":
		return runScheduleSet(ctx, args[1:], stdout)
	case "show", "delete", "pause", "resume":
		return runScheduleOne(ctx, args[0], args[1:], stdout)
	case "run":
		return runScheduleRun(ctx, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, schedulesUsage)
		return nil
	}
	return usagef("unknown action %q: want list, show, set, delete, pause, resume or run", args[0])
}

// runSchedulesList prints every schedule.
func runSchedulesList(ctx context.Context, args []string, stdout io.Writer) error {
	return runRead(ctx, "schedules list", `print JSON: {"schedules": [...]}`, args, stdout,
		func(b backend, ctx context.Context) (httpapi.SchedulesResponse, error) {
			scs, err := b.schedules(ctx)
			return httpapi.SchedulesResponse{Schedules: scs}, err
		}, printSchedules)
}

// printSchedules writes the schedules as a table.
func printSchedules(w io.Writer, res httpapi.SchedulesResponse) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCRON\tTIME ZONE\tSTATE\tNEXT RUN\tLAST RUN\tLAST JOB\tKIND\tQUEUE")
	for _, sc := range res.Schedules {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sc.Name, sc.Cron, sc.TimeZone, scheduleState(sc),
			fmtTimePtr(sc.NextRunAt), fmtTimePtr(sc.LastRunAt), jobIDOrDash(sc.LastJobID), sc.Job.Kind, sc.Job.Queue)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

func scheduleState(sc httpapi.Schedule) string {
	if sc.Paused {
		return "paused"
	}
	return "running"
}

func jobIDOrDash(id *int64) string {
	if id == nil {
		return "-"
	}
	return strconv.FormatInt(*id, 10)
}

// runScheduleSet creates or replaces a schedule from flags.
func runScheduleSet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("schedules set", "schedules set NAME --cron EXPR --kind KIND [flags]", stdout)
	tf := addTargetFlags(fs)
	cron := fs.String("cron", "", `when it ticks: 5 fields ("0 9 * * MON-FRI"), 6 with seconds first, or @hourly, @daily, @every 5m... (required)`)
	tz := fs.String("time-zone", "UTC", "IANA time zone the fields are read in, such as Europe/Paris")
	catchUp := fs.String("catch-up", "skip", "ticks no scheduler reached in time: skip them, or once (one job for all of them)")
	paused := fs.Bool("paused", false, "pause the schedule (see also 'schedules pause' and 'resume')")
	kind := fs.String("kind", "", "kind of the job each tick enqueues (required)")
	payload := fs.String("payload", "{}", "the job's payload, a JSON value")
	queue := fs.String("queue", readpast.DefaultQueue, "the job's queue")
	priority := fs.Int("priority", 0, "the job's priority, lower runs first")
	maxAttempts := fs.Int("max-attempts", readpast.DefaultMaxAttempts, "the job's attempts before it fails for good")
	group := fs.String("group", "", "the job's key (its concurrency group), which limits apply to")
	key := fs.String("key", "", "the same as --group")
	asJSON := fs.Bool("json", false, "print the schedule as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one schedule name")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	groupFlag, err := mergeKeyFlag(set, group, key)
	if err != nil {
		return err
	}
	if !json.Valid([]byte(*payload)) {
		return usagef("--payload: not valid JSON")
	}
	job := httpapi.ScheduleJobRequest{Kind: *kind, Payload: json.RawMessage(*payload), Queue: *queue,
		Priority: priority, MaxAttempts: maxAttempts}
	if *group != "" {
		job.Group = group
	}
	jb, err := json.Marshal(job)
	if err != nil {
		return err
	}
	req := httpapi.PutScheduleRequest{Cron: *cron, TimeZone: tz, CatchUp: catchUp, Job: jb}
	if set["paused"] {
		req.Paused = paused
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := httpapi.ParsePutSchedule(pos[0], body, time.Now()); err != nil {
		return usageError{renameGroupFlag(scheduleFlagError(err), groupFlag)}
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	sc, created, err := b.putSchedule(ctx, pos[0], body)
	if err != nil {
		return fmt.Errorf("set: %w", scheduleFlagError(err))
	}
	if *asJSON {
		return writeJSON(stdout, sc)
	}
	if created {
		fmt.Fprintf(stdout, "created schedule %s\n\n", sc.Name)
	} else {
		fmt.Fprintf(stdout, "replaced schedule %s\n\n", sc.Name)
	}
	return printSchedule(stdout, sc)
}

// scheduleFlagError renames the JSON field in a validation error after
// its flag.
func scheduleFlagError(err error) error {
	msg := err.Error()
	for _, f := range [][2]string{{"time_zone", "time-zone"}, {"catch_up", "catch-up"}, {"job.max_attempts", "max-attempts"},
		{"job.kind", "kind"}, {"job.payload", "payload"}, {"job.queue", "queue"}, {"job.priority", "priority"},
		{"job.group", "group"}, {"cron", "cron"}, {"name", "NAME"}} {
		if after, ok := strings.CutPrefix(msg, f[0]+":"); ok {
			if f[1] == "NAME" {
				return fmt.Errorf("schedule name:%s", after)
			}
			return fmt.Errorf("--%s:%s", f[1], after)
		}
	}
	return err
}

// runScheduleOne runs show, delete, pause or resume on one schedule.
func runScheduleOne(ctx context.Context, action string, args []string, stdout io.Writer) error {
	fs := newFlagSet("schedules "+action, "schedules "+action+" NAME [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, "print the schedule as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one schedule name")
	}
	name := pos[0]
	b, err := tf.open(ctx, action == "show")
	if err != nil {
		return err
	}
	defer b.close()
	var sc httpapi.Schedule
	switch action {
	case "show":
		sc, err = b.schedule(ctx, name)
	case "delete":
		err = b.deleteSchedule(ctx, name)
	default:
		sc, err = b.pauseSchedule(ctx, name, action == "pause")
	}
	if errors.Is(err, readpast.ErrScheduleNotFound) {
		return fmt.Errorf("schedule %q not found", name)
	}
	if err != nil {
		return fmt.Errorf("%s schedule %s: %w", action, name, err)
	}
	if action == "delete" {
		if !*asJSON {
			fmt.Fprintf(stdout, "deleted schedule %s\n", name)
		}
		return nil
	}
	if *asJSON {
		return writeJSON(stdout, sc)
	}
	return printSchedule(stdout, sc)
}

// runScheduleRun enqueues a schedule's job due now ("Run now"), paused or
// not, and prints the job made. The schedule's ticks are unchanged: a
// manual run is not one of its runs.
func runScheduleRun(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("schedules run", "schedules run NAME [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, "print the job made as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want exactly one schedule name")
	}
	name := pos[0]
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	job, err := b.runSchedule(ctx, name)
	if errors.Is(err, readpast.ErrScheduleNotFound) {
		return fmt.Errorf("schedule %q not found", name)
	}
	if err != nil {
		return fmt.Errorf("run schedule %s: %w", name, err)
	}
	if *asJSON {
		return writeJSON(stdout, job)
	}
	fmt.Fprintf(stdout, "made job %d from schedule %s, due now (its ticks are unchanged)\n\n", job.ID, name)
	return printJob(stdout, job)
}

// printSchedule prints a schedule and its latest runs.
func printSchedule(w io.Writer, sc httpapi.Schedule) error {
	group := "-"
	if sc.Job.Group != nil {
		group = *sc.Job.Group
	}
	if err := writeFacts(w, [][2]string{
		{"name", sc.Name},
		{"cron", sc.Cron},
		{"time zone", sc.TimeZone},
		{"catch up", string(sc.CatchUp)},
		{"state", scheduleState(sc)},
		{"next run", fmtTimePtr(sc.NextRunAt)},
		{"last run", fmtTimePtr(sc.LastRunAt)},
		{"last job", jobIDOrDash(sc.LastJobID)},
		{"job", fmt.Sprintf("kind %s, queue %s, priority %d, group %s, max attempts %d", sc.Job.Kind, sc.Job.Queue,
			sc.Job.Priority, group, sc.Job.MaxAttempts)},
		{"payload", string(sc.Job.Payload)},
	}); err != nil {
		return err
	}
	if len(sc.Runs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TICK\tJOB\tCATCH-UP")
	for _, r := range sc.Runs {
		cu := ""
		if r.CatchUp {
			cu = "yes"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", fmtTime(r.Tick), r.JobID, cu)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}
