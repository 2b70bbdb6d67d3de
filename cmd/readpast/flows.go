package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// flowsUsage is the synopsis of `readpast flows`.
const flowsUsage = "Usage: readpast flows enqueue FILE|- [flags]"

// maxFlowFileBytes caps a flow file: far more than a flow of
// readpast.MaxFlowJobs jobs of ordinary size needs.
const maxFlowFileBytes = 64 << 20

// runFlows runs `flows enqueue`.
func runFlows(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return flowsFrom(ctx, os.Stdin, args, stdout, stderr)
}

// flowsFrom is runFlows reading "-" from stdin.
func flowsFrom(ctx context.Context, stdin io.Reader, args []string, stdout, _ io.Writer) error {
	if len(args) == 0 {
		return usagef("missing action: want enqueue")
	}
	switch args[0] {
	case "enqueue":
		return runFlowsEnqueue(ctx, stdin, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, flowsUsage)
		return nil
	}
	return usagef("unknown action %q: want enqueue", args[0])
}

// runFlowsEnqueue enqueues the flow in a file (or stdin, "-"): the body of
// POST /v1/flows, {"jobs": [{"ref", "kind", ..., "after": [{"ref"|"job_id",
// "policy"}]}]}. The flow is checked whole before anything is sent, and
// stored all or none.
func runFlowsEnqueue(ctx context.Context, stdin io.Reader, args []string, stdout io.Writer) error {
	fs := newFlagSet("flows enqueue", "flows enqueue FILE|- [flags]   (FILE: the body of POST /v1/flows; - reads stdin)", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, `print the API's response: {"jobs": [...]}`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("missing FILE: the flow as JSON, or - for stdin")
	case len(pos) > 1:
		return usagef("unexpected argument %q", pos[1])
	}
	body, err := readFlowFile(pos[0], stdin)
	if err != nil {
		return err
	}
	if _, err := httpapi.ParseFlow(body, time.Now()); err != nil {
		return usagef("%s: %v (nothing was enqueued)", flowFileName(pos[0]), err)
	}

	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	jobs, err := enqueueFlow(ctx, b, body)
	switch {
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("enqueue flow: larger than the server accepts (its --max-batch or --max-body-bytes); nothing was enqueued: %w", err)
	case err != nil:
		return fmt.Errorf("enqueue flow: %w", err)
	}
	if *asJSON {
		return writeJSON(stdout, httpapi.JobsResponse{Jobs: jobs})
	}
	raws := make([]json.RawMessage, len(jobs))
	for i, j := range jobs {
		if raws[i], err = json.Marshal(j); err != nil {
			return fmt.Errorf("encode job %d: %w", j.ID, err)
		}
	}
	return printJobs(stdout, raws)
}

// readFlowFile reads the flow file name, or stdin for "-", up to
// maxFlowFileBytes.
func readFlowFile(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, usagef("read flow: %v", err)
		}
		defer f.Close()
		r = f
	}
	body, err := io.ReadAll(io.LimitReader(r, maxFlowFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", flowFileName(name), err)
	}
	if len(body) > maxFlowFileBytes {
		return nil, usagef("%s: larger than %d bytes", flowFileName(name), maxFlowFileBytes)
	}
	return body, nil
}

// flowFileName names the flow's source in messages.
func flowFileName(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}

// enqueueFlow stores a flow (the body of POST /v1/flows) through b: with
// POST /v1/flows on a server, or the store's EnqueueFlow on a database.
func enqueueFlow(ctx context.Context, b backend, body []byte) ([]httpapi.Job, error) {
	switch b := b.(type) {
	case *remote:
		var out httpapi.JobsResponse
		if err := b.do(ctx, http.MethodPost, "/v1/flows", json.RawMessage(body), &out); err != nil {
			return nil, err
		}
		return out.Jobs, nil
	case *direct:
		flow, err := httpapi.ParseFlow(body, time.Now())
		if err != nil {
			return nil, err
		}
		fs, ok := b.store.(readpast.FlowStore)
		if !ok {
			return nil, fmt.Errorf("the store %T keeps no dependencies between jobs", b.store)
		}
		ctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		jobs, err := fs.EnqueueFlow(ctx, flow)
		if pe := (*readpast.ParentError)(nil); errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: %w; nothing was enqueued", httpapi.ParentField(flow, pe.ID), pe)
		}
		if err != nil {
			return nil, err
		}
		return httpapi.NewJobs(jobs), nil
	}
	return nil, fmt.Errorf("enqueue flow: unknown backend %T", b)
}
