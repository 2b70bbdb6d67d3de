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

// Most jobs, and most bytes of job bodies, sent in one batch (the server's
// defaults are 1000 jobs and 4 MiB a request). A server with lower limits
// answers 413, and smaller batches follow.
const (
	enqueueBatchSize  = 1000
	enqueueBatchBytes = 1 << 20
)

// maxLineBytes caps one JSON line on stdin.
const maxLineBytes = 16 << 20

// runEnqueue enqueues one job described by flags, or, with --stdin, one job
// per JSON line on stdin (the body of POST /v1/jobs: {"kind", "payload",
// "queue", "priority", "run_at", "max_attempts", "group", "keys", "tags",
// ...}), through a server or directly into a database (see
// addTargetFlags).
//
// With --stdin every line is read and validated before anything is
// enqueued, so a bad line (reported with its line number) enqueues nothing.
// The valid jobs are then enqueued in batches of up to 1000, each batch
// atomic; should a batch fail, the jobs of the batches already enqueued
// stay enqueued and the error says how many. Blank lines are skipped.
// Progress goes to stderr when it is a terminal.
func runEnqueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return enqueueFrom(ctx, os.Stdin, args, stdout, stderr)
}

// enqueueFrom is runEnqueue reading JSON lines from stdin.
func enqueueFrom(ctx context.Context, stdin io.Reader, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("enqueue", "enqueue --kind KIND [flags] | enqueue --stdin [flags] < jobs.jsonl", stdout)
	tf := addTargetFlags(fs)
	kind := fs.String("kind", "", "job kind (required without --stdin)")
	payload := fs.String("payload", "{}", "job payload, a JSON value")
	queue := fs.String("queue", readpast.DefaultQueue, "queue")
	priority := fs.Int("priority", 0, fmt.Sprintf("priority, lower runs first (%d to %d)", readpast.MinPriority, readpast.MaxPriority))
	runAt := fs.String("run-at", "", "RFC 3339 time before which the job does not run (default now)")
	maxAttempts := fs.Int("max-attempts", readpast.DefaultMaxAttempts, "attempts before the job fails for good")
	group := fs.String("group", "", "the job's key (its concurrency group): the limit declared for it, or for a template it matches, applies (see 'readpast limits'); without one, one job of the key runs at a time")
	var keys stringList
	fs.Var(&keys, "key", fmt.Sprintf("a key of the job (repeat for several, at most %d): the first is its group (--group), and the job starts only when the limit of every key allows it", readpast.MaxKeys))
	uniqueKey := fs.String("unique-key", "", "unique key: while a job holds it, enqueueing it again creates nothing and shows that job")
	var tags stringList
	fs.Var(&tags, "tag", fmt.Sprintf("a tag for the job (repeat for several, at most %d)", readpast.MaxTags))
	uniqueFor := fs.Duration("unique-for", 0, "keep --unique-key held this long after the enqueue, whatever the job's outcome (such as 24h)")
	fromStdin := fs.Bool("stdin", false, "read jobs as JSON lines from stdin instead of flags; every line is validated before any job is enqueued")
	asJSON := fs.Bool("json", false, "print the enqueued jobs as JSON (one object a line with --stdin)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	groupFlag, err := mergeKeysFlag(set, group, keys)
	if err != nil {
		return err
	}
	var jobs []json.RawMessage
	if *fromStdin {
		for _, name := range []string{"kind", "payload", "queue", "priority", "run-at", "max-attempts", "group", "key", "unique-key", "unique-for", "tag"} {
			if set[name] {
				return usagef("--%s cannot be used with --stdin: put it in each JSON line", name)
			}
		}
		jobs, err = readJobLines(stdin, time.Now())
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
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
		if len(keys) > 1 {
			req.Group, req.Keys = nil, keys
		}
		if *uniqueKey != "" {
			req.UniqueKey = uniqueKey
		}
		req.Tags = tags
		if set["unique-for"] {
			if *uniqueFor < time.Second || *uniqueFor > readpast.MaxUniqueFor {
				return usagef("--unique-for must be between 1s and %s (%d days), not %s", readpast.MaxUniqueFor, readpast.MaxUniqueFor/(24*time.Hour), *uniqueFor)
			}
			secs := uniqueFor.Seconds()
			req.UniqueForSeconds = &secs
		}
		body, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("encode job: %w", err)
		}
		if _, err := httpapi.ParseEnqueue(body, time.Now()); err != nil {
			return usageError{renameGroupFlag(flagError(err), groupFlag)}
		}
		jobs = []json.RawMessage{body}
	}

	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()

	if !*fromStdin {
		out, err := b.enqueue(ctx, jobs)
		switch {
		case errors.Is(err, errTooLarge):
			return fmt.Errorf("enqueue: the job is larger than the server accepts (its --max-body-bytes): %w", err)
		case err != nil:
			return fmt.Errorf("enqueue: %w", flagError(err))
		}
		if *asJSON {
			return writeJSON(stdout, out[0])
		}
		if out[0].Duplicate {
			fmt.Fprintf(stdout, "nothing enqueued: job %d holds unique key %q\n\n", out[0].ID, out[0].UniqueKey)
		}
		return printJob(stdout, out[0])
	}

	progress := isTerminal(stderr)
	enc := json.NewEncoder(stdout)
	done, size, dups := 0, enqueueBatchSize, 0
	for done < len(jobs) {
		end, bytes := done, 0
		for end < len(jobs) && end-done < size && (end == done || bytes+len(jobs[end]) <= enqueueBatchBytes) {
			bytes += len(jobs[end])
			end++
		}
		out, err := b.enqueue(ctx, jobs[done:end])
		if errors.Is(err, errTooLarge) && end-done > 1 {
			size = (end - done) / 2 // nothing was stored: send fewer at a time
			continue
		}
		if err != nil {
			if progress {
				fmt.Fprintln(stderr)
			}
			return fmt.Errorf("enqueue jobs %d to %d of %d: %w (the %d jobs before them were enqueued)",
				done+1, end, len(jobs), err, done)
		}
		for _, j := range out {
			if j.Duplicate {
				dups++
			}
		}
		if *asJSON {
			for _, j := range out {
				if err := enc.Encode(j); err != nil {
					return fmt.Errorf("write output: %w", err)
				}
			}
		}
		done = end
		if progress {
			fmt.Fprintf(stderr, "\renqueued %d/%d", done, len(jobs))
		}
	}
	if progress {
		fmt.Fprintln(stderr)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "enqueued %d jobs\n", done-dups)
		if dups > 0 {
			fmt.Fprintf(stdout, "%d lines were duplicates: their unique keys were held, nothing was enqueued for them\n", dups)
		}
	}
	return nil
}

// readJobLines reads and validates every JSON line of r, and returns the
// lines (without surrounding space). It stops at the first bad line and
// names its (1-based) line number.
func readJobLines(r io.Reader, now time.Time) ([]json.RawMessage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	var out []json.RawMessage
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if _, err := httpapi.ParseEnqueue(b, now); err != nil {
			return nil, usagef("line %d: %v (nothing was enqueued)", line, err)
		}
		out = append(out, bytes.Clone(b))
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
	for _, f := range [][2]string{{"run_at", "run-at"}, {"max_attempts", "max-attempts"}, {"unique_key", "unique-key"},
		{"unique_for_seconds", "unique-for"}} {
		if after, ok := strings.CutPrefix(msg, f[0]+":"); ok {
			return fmt.Errorf("--%s:%s", f[1], after)
		}
	}
	for _, f := range []string{"kind", "payload", "queue", "priority", "group"} {
		if after, ok := strings.CutPrefix(msg, f+":"); ok {
			return fmt.Errorf("--%s:%s", f, after)
		}
	}
	for _, f := range [][2]string{{"tags", "tag"}, {"keys", "key"}} {
		if after, ok := strings.CutPrefix(msg, f[0]+":"); ok {
			return fmt.Errorf("--%s:%s", f[1], after)
		}
	}
	return err
}

// mergeKeysFlag folds the keys of --key (repeatable) and --group, which
// is the first key, into group when there is one key (sent as "group",
// which every server takes) or leaves them in keys when there are
// several. It returns the name of the flag that gave the group, for
// messages. A --group that is not the first --key is a usage error.
func mergeKeysFlag(set map[string]bool, group *string, keys []string) (string, error) {
	if len(keys) == 0 {
		return "group", nil
	}
	if set["group"] && *group != keys[0] {
		return "", usagef("--group is the job's first key: give it as the first --key, or leave it out")
	}
	*group = keys[0]
	return "key", nil
}

// mergeKeyFlag folds --key, an alias of --group, into group, and returns
// the name of the flag that gave the key, for messages. Both flags with
// different values are a usage error.
func mergeKeyFlag(set map[string]bool, group, key *string) (string, error) {
	if !set["key"] {
		return "group", nil
	}
	if set["group"] && *group != *key {
		return "", usagef("--key is another name for --group: give one")
	}
	*group = *key
	return "key", nil
}

// renameGroupFlag names --key in err when the key came from it.
func renameGroupFlag(err error, name string) error {
	if name == "group" {
		return err
	}
	if after, ok := strings.CutPrefix(err.Error(), "--group:"); ok {
		return fmt.Errorf("--%s:%s", name, after)
	}
	return err
}
