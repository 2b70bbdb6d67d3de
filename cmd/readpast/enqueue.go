package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// enqueueBatchSize is how many jobs one Store.Enqueue call inserts when
// reading JSON lines.
const enqueueBatchSize = 1000

// maxLineBytes caps one JSON line on stdin.
const maxLineBytes = 16 << 20

// runEnqueue enqueues one job described by flags, or, with --stdin, one job
// per JSON line on stdin (the body of POST /v1/jobs: {"kind", "payload",
// "queue", "priority", "run_at", "max_attempts", "group"}).
//
// With --stdin every line is read and validated before anything is
// enqueued, so a bad line (reported with its line number) enqueues nothing.
// The valid jobs are then enqueued in batches of 1000, each batch atomic;
// should the database fail midway, the jobs of the batches already
// committed stay enqueued and the error says how many. Blank lines are
// skipped. Progress goes to stderr when it is a terminal.
func runEnqueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return enqueueFrom(ctx, os.Stdin, args, stdout, stderr)
}

// enqueueFrom is runEnqueue reading JSON lines from stdin.
func enqueueFrom(ctx context.Context, stdin io.Reader, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("enqueue", "enqueue --kind KIND [flags] | enqueue --stdin [flags] < jobs.jsonl", stderr)
	dbURL := dbFlag(fs)
	kind := fs.String("kind", "", "job kind (required without --stdin)")
	payload := fs.String("payload", "{}", "job payload, a JSON value")
	queue := fs.String("queue", readpast.DefaultQueue, "queue")
	priority := fs.Int("priority", 0, fmt.Sprintf("priority, lower runs first (%d to %d)", readpast.MinPriority, readpast.MaxPriority))
	runAt := fs.String("run-at", "", "RFC 3339 time before which the job does not run (default now)")
	maxAttempts := fs.Int("max-attempts", readpast.DefaultMaxAttempts, "attempts before the job fails for good")
	group := fs.String("group", "", "concurrency group key")
	fromStdin := fs.Bool("stdin", false, "read jobs as JSON lines from stdin instead of flags; every line is validated before any job is enqueued")
	asJSON := fs.Bool("json", false, "print the enqueued jobs as JSON (one object a line with --stdin)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}

	var params []readpast.EnqueueParams
	if *fromStdin {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, name := range []string{"kind", "payload", "queue", "priority", "run-at", "max-attempts", "group"} {
			if set[name] {
				return usagef("--%s cannot be used with --stdin: put it in each JSON line", name)
			}
		}
		params, err = readJobLines(stdin, time.Now())
		if err != nil {
			return err
		}
		if len(params) == 0 {
			fmt.Fprintln(stderr, "no jobs on stdin")
			return nil
		}
	} else {
		req := httpapi.EnqueueRequest{
			Kind:        *kind,
			Payload:     json.RawMessage(*payload),
			Queue:       *queue,
			Priority:    priority,
			MaxAttempts: maxAttempts,
		}
		if !json.Valid(req.Payload) {
			return usagef("--payload: not valid JSON")
		}
		if *runAt != "" {
			req.RunAt = runAt
		}
		if *group != "" {
			req.Group = group
		}
		body, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("encode job: %w", err)
		}
		p, err := httpapi.ParseEnqueue(body, time.Now())
		if err != nil {
			return usageError{flagError(err)}
		}
		params = []readpast.EnqueueParams{p}
	}

	store, err := openStore(ctx, databaseURL(*dbURL), nil)
	if err != nil {
		return err
	}
	defer store.Close()

	if !*fromStdin {
		jobs, err := store.Enqueue(ctx, params)
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		if *asJSON {
			return writeJSON(stdout, httpapi.NewJob(jobs[0]))
		}
		return printJob(stdout, jobs[0])
	}

	progress := isTerminal(stderr)
	enc := json.NewEncoder(stdout)
	done := 0
	for done < len(params) {
		end := min(done+enqueueBatchSize, len(params))
		jobs, err := store.Enqueue(ctx, params[done:end])
		if err != nil {
			if progress {
				fmt.Fprintln(stderr)
			}
			return fmt.Errorf("enqueue jobs %d to %d of %d: %w (the %d jobs before them were enqueued)",
				done+1, end, len(params), err, done)
		}
		if *asJSON {
			for _, j := range jobs {
				if err := enc.Encode(httpapi.NewJob(j)); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
			}
		}
		done = end
		if progress {
			fmt.Fprintf(stderr, "\renqueued %d/%d", done, len(params))
		}
	}
	if progress {
		fmt.Fprintln(stderr)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "enqueued %d jobs\n", done)
	}
	return nil
}

// readJobLines reads and validates every JSON line of r. It stops at the
// first bad line and names its (1-based) line number.
func readJobLines(r io.Reader, now time.Time) ([]readpast.EnqueueParams, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	var out []readpast.EnqueueParams
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		p, err := httpapi.ParseEnqueue(b, now)
		if err != nil {
			return nil, usagef("line %d: %v (nothing was enqueued)", line, err)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, usagef("line %d: longer than %d bytes (nothing was enqueued)", line+1, maxLineBytes)
		}
		return nil, fmt.Errorf("read stdin at line %d: %w (nothing was enqueued)", line+1, err)
	}
	return out, nil
}

// flagError renames the JSON field in a validation error after its flag.
func flagError(err error) error {
	msg := err.Error()
	for _, f := range [][2]string{{"run_at", "run-at"}, {"max_attempts", "max-attempts"}} {
		if after, ok := strings.CutPrefix(msg, f[0]+":"); ok {
			return fmt.Errorf("--%s:%s", f[1], after)
		}
	}
	for _, f := range []string{"kind", "payload", "queue", "priority", "group"} {
		if after, ok := strings.CutPrefix(msg, f+":"); ok {
			return fmt.Errorf("--%s:%s", f, after)
		}
	}
	return err
}
