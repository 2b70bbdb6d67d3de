package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// batchesUsage is the synopsis of `readpast batches`.
const batchesUsage = `Usage: readpast batches open --kind K [--payload JSON] [--queue Q] [--on-success]
       readpast batches add ID --kind K [--payload JSON] [--queue Q] | --stdin < jobs.jsonl
       readpast batches seal ID
       readpast batches show ID`

// runBatches runs `batches open|add|seal|show`.
func runBatches(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return batchesFrom(ctx, os.Stdin, args, stdout)
}

// batchesFrom is runBatches reading `add --stdin` from stdin.
func batchesFrom(ctx context.Context, stdin io.Reader, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usagef("missing action: want open, add, seal or show")
	}
	switch args[0] {
	case "open":
		return runBatchOpen(ctx, args[1:], stdout)
	case "add":
		return runBatchAdd(ctx, stdin, args[1:], stdout)
	case "seal", "show":
		return runBatchRead(ctx, args[0], args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, batchesUsage)
		return nil
	}
	return usagef("unknown action %q: want open, add, seal or show", args[0])
}

// batchJobFlags are the flags that describe one job of a batch.
type batchJobFlags struct {
	kind, payload, queue *string
}

func addBatchJobFlags(fs interface {
	String(name, value, usage string) *string
}) batchJobFlags {
	return batchJobFlags{
		kind:    fs.String("kind", "", "job kind (required)"),
		payload: fs.String("payload", "{}", "job payload, a JSON value"),
		queue:   fs.String("queue", readpast.DefaultQueue, "queue"),
	}
}

// job is the job the flags describe, as the body of POST /v1/jobs,
// checked.
func (f batchJobFlags) job() (json.RawMessage, error) {
	raw, err := json.Marshal(map[string]any{"kind": *f.kind, "payload": json.RawMessage(*f.payload), "queue": *f.queue})
	if err != nil {
		return nil, usagef("--payload: not valid JSON")
	}
	if _, err := httpapi.ParseEnqueue(raw, time.Now()); err != nil {
		return nil, usageError{flagError(err)}
	}
	return raw, nil
}

// runBatchOpen opens a batch whose finishing job the flags describe.
func runBatchOpen(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("batches open", "batches open --kind KIND [flags]", stdout)
	tf := addTargetFlags(fs)
	jf := addBatchJobFlags(fs)
	onSuccess := fs.Bool("on-success", false, "run the finishing job only if every member succeeds")
	asJSON := fs.Bool("json", false, "print the batch as the API answers it")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *jf.kind == "" {
		return usagef("--kind is required: the finishing job's kind")
	}
	fin, err := jf.job()
	if err != nil {
		return err
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	var out httpapi.Batch
	switch b := b.(type) {
	case *remote:
		err = b.do(ctx, http.MethodPost, "/v1/batches", httpapi.OpenBatchRequest{Finisher: fin, OnSuccess: *onSuccess}, &out)
	case *direct:
		err = withBatchStore(ctx, b, func(ctx context.Context, bs readpast.BatchStore) error {
			p, err := httpapi.ParseEnqueue(fin, time.Now())
			if err != nil {
				return err
			}
			j, err := bs.OpenBatch(ctx, readpast.BatchParams{Finisher: p, OnSuccess: *onSuccess})
			if err == nil {
				out = httpapi.NewBatch(readpast.Batch{ID: j.ID, OnSuccess: *onSuccess, Finisher: j})
			}
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("open batch: %w", err)
	}
	return printBatch(stdout, out, *asJSON)
}

// runBatchAdd adds the job the flags describe, or the JSON lines of stdin
// (each the body of POST /v1/jobs), to batch ID, all or none.
func runBatchAdd(ctx context.Context, stdin io.Reader, args []string, stdout io.Writer) error {
	fs := newFlagSet("batches add", "batches add ID --kind KIND [flags] | batches add ID --stdin < jobs.jsonl", stdout)
	tf := addTargetFlags(fs)
	jf := addBatchJobFlags(fs)
	fromStdin := fs.Bool("stdin", false, "read the jobs as JSON lines from stdin; every line is checked before any job is enqueued")
	asJSON := fs.Bool("json", false, `print the API's response: {"jobs": [...]}`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	id, err := batchID(pos)
	if err != nil {
		return err
	}
	var jobs []json.RawMessage
	switch {
	case *fromStdin && *jf.kind != "":
		return usagef("--stdin reads the jobs from stdin: give no --kind")
	case *fromStdin:
		if jobs, err = readJobLines(stdin, time.Now()); err != nil {
			return err
		}
		if len(jobs) == 0 {
			return usagef("stdin holds no job")
		}
	case *jf.kind == "":
		return usagef("--kind is required (or --stdin)")
	default:
		j, err := jf.job()
		if err != nil {
			return err
		}
		jobs = []json.RawMessage{j}
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	var out []httpapi.Job
	switch b := b.(type) {
	case *remote:
		var resp httpapi.JobsResponse
		err = b.do(ctx, http.MethodPost, fmt.Sprintf("/v1/batches/%d/jobs", id), map[string]any{"jobs": jobs}, &resp)
		out = resp.Jobs
	case *direct:
		err = withBatchStore(ctx, b, func(ctx context.Context, bs readpast.BatchStore) error {
			now := time.Now()
			ps := make([]readpast.EnqueueParams, len(jobs))
			for i, raw := range jobs {
				p, err := httpapi.ParseEnqueue(raw, now)
				if err != nil {
					return err
				}
				ps[i] = p
			}
			js, err := bs.AddToBatch(ctx, id, ps)
			out = httpapi.NewJobs(js)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("add to batch %d: %w", id, err)
	}
	if *asJSON {
		return writeJSON(stdout, httpapi.JobsResponse{Jobs: out})
	}
	raws := make([]json.RawMessage, len(out))
	for i, j := range out {
		if raws[i], err = json.Marshal(j); err != nil {
			return fmt.Errorf("encode job %d: %w", j.ID, err)
		}
	}
	return printJobs(stdout, raws)
}

// runBatchRead seals batch ID (action "seal") or shows it ("show").
func runBatchRead(ctx context.Context, action string, args []string, stdout io.Writer) error {
	fs := newFlagSet("batches "+action, "batches "+action+" ID [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, "print the batch as the API answers it")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	id, err := batchID(pos)
	if err != nil {
		return err
	}
	b, err := tf.open(ctx, action == "show")
	if err != nil {
		return err
	}
	defer b.close()
	var out httpapi.Batch
	switch b := b.(type) {
	case *remote:
		if action == "seal" {
			err = b.do(ctx, http.MethodPost, fmt.Sprintf("/v1/batches/%d/seal", id), nil, &out)
		} else {
			err = b.do(ctx, http.MethodGet, fmt.Sprintf("/v1/batches/%d", id), nil, &out)
		}
	case *direct:
		err = withBatchStore(ctx, b, func(ctx context.Context, bs readpast.BatchStore) error {
			var got readpast.Batch
			var err error
			if action == "seal" {
				got, err = bs.SealBatch(ctx, id)
			} else {
				got, err = bs.Batch(ctx, id)
			}
			out = httpapi.NewBatch(got)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("%s batch %d: %w", action, id, err)
	}
	return printBatch(stdout, out, *asJSON)
}

// batchID is the one positional argument, a batch's id.
func batchID(pos []string) (int64, error) {
	switch {
	case len(pos) == 0:
		return 0, usagef("missing ID: the batch's id (its finishing job's)")
	case len(pos) > 1:
		return 0, usagef("unexpected argument %q", pos[1])
	}
	id, err := parseJobID(pos[0])
	if err != nil {
		return 0, usagef("batch id must be a positive integer such as 42, not %q", pos[0])
	}
	return id, nil
}

// withBatchStore runs f on the database's store as a BatchStore, within
// the command's timeout.
func withBatchStore(ctx context.Context, d *direct, f func(context.Context, readpast.BatchStore) error) error {
	bs, ok := d.store.(readpast.BatchStore)
	if !ok {
		return fmt.Errorf("the store %T keeps no batches", d.store)
	}
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return f(ctx, bs)
}

// printBatch prints b as JSON, or as a few lines of text.
func printBatch(w io.Writer, b httpapi.Batch, asJSON bool) error {
	if asJSON {
		return writeJSON(w, b)
	}
	state := "open"
	if b.Sealed {
		state = "sealed"
	}
	when := "whatever its members' outcomes"
	if b.OnSuccess {
		when = "if every member succeeds"
	}
	fmt.Fprintf(w, "batch %d: %s; finishing job %d (%s) is %s, runs %s\n", b.ID, state, b.Finisher.ID, b.Finisher.Kind, b.Finisher.State, when)
	fmt.Fprintf(w, "members: %d (live %d, succeeded %d, failed %d, cancelled %d)\n", b.Members, b.Live, b.Succeeded, b.Failed, b.Cancelled)
	return nil
}
