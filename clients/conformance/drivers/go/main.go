// Command go is the Go conformance driver: it speaks the protocol of
// clients/conformance/README.md on standard input and output, and carries
// out each operation over readpast's HTTP API with net/http and the API's
// own wire types (package httpapi). There is no Go HTTP client package to
// drive: the readpast command's HTTP client is internal to it. So this
// driver checks the API itself, and is the reference the other drivers'
// outcomes are held to.
//
//	READPAST_URL=http://127.0.0.1:8080 READPAST_TOKEN=... driver
//
// "driver worker QUEUE CONCURRENCY SHUTDOWN_SECONDS" runs the worker
// process of the run_worker operation.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/readpast/readpast/httpapi"
)

// protocol names the conformance protocol this driver speaks.
const protocol = "readpast-conformance/1"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := runWorkerProcess(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
	if err := serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

// request is one line the runner sends.
type request struct {
	Seq  int             `json:"seq"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// reply is the line the driver answers it with.
type reply struct {
	Seq   int        `json:"seq"`
	OK    bool       `json:"ok"`
	Value any        `json:"value,omitempty"`
	Error *errorInfo `json:"error,omitempty"`
}

// errorInfo is an operation's error: the API's status and code, or
// status 0 and a driver code for an error that is not the server's.
type errorInfo struct {
	Status  int     `json:"status"`
	Code    string  `json:"code"`
	Field   *string `json:"field"`
	Message string  `json:"message"`
}

func (e *errorInfo) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

// serve answers the runner's requests until its input ends.
func serve(ctx context.Context, in io.Reader, out io.Writer) error {
	c, err := newAPI(os.Getenv("READPAST_URL"), os.Getenv("READPAST_TOKEN"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	if err := enc.Encode(map[string]string{"hello": protocol, "driver": "go", "library": "net/http + httpapi wire types"}); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("a request is not JSON: %w", err)
		}
		value, err := c.do(ctx, req.Op, req.Args)
		rep := reply{Seq: req.Seq, OK: err == nil, Value: value}
		if err != nil {
			var ei *errorInfo
			if !errors.As(err, &ei) {
				ei = &errorInfo{Code: "driver_error", Message: err.Error()}
			}
			rep.Error = ei
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// api is a client of one server's HTTP API.
type api struct {
	base, token string
	hc          *http.Client
}

func newAPI(base, token string) (*api, error) {
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("READPAST_URL must be an http:// or https:// URL, not %q", base)
	}
	return &api{base: strings.TrimSuffix(base, "/"), token: token, hc: &http.Client{}}, nil
}

// send sends one request with body as it is (nil: none) and returns the
// status and the body of the answer.
func (c *api) send(ctx context.Context, method, path string, header http.Header, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// call sends in as JSON (nil: no body) and decodes a 2xx answer into out;
// an error answer is an *errorInfo.
func (c *api) call(ctx context.Context, method, path string, header http.Header, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	status, b, err := c.send(ctx, method, path, header, body)
	if err != nil {
		return err
	}
	if status >= 300 {
		return apiError(status, b)
	}
	if out == nil || status == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the API's JSON: %w: %.300s", method, path, err, b)
	}
	return nil
}

// apiError reads an error answer.
func apiError(status int, b []byte) *errorInfo {
	var eb httpapi.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code == "" {
		return &errorInfo{Status: status, Code: "http_error", Message: strings.TrimSpace(string(b))}
	}
	ei := &errorInfo{Status: status, Code: eb.Error.Code, Message: eb.Error.Message}
	if eb.Error.Field != "" {
		f := eb.Error.Field
		ei.Field = &f
	}
	return ei
}

// job is a job as drivers report it (README.md, "The job outcome").
type job struct {
	ID             int64           `json:"id"`
	Queue          string          `json:"queue"`
	Kind           string          `json:"kind"`
	State          string          `json:"state"`
	Priority       int             `json:"priority"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	Payload        json.RawMessage `json:"payload"`
	Group          *string         `json:"group"`
	Keys           []string        `json:"keys"`
	Result         json.RawMessage `json:"result"`
	Duplicate      bool            `json:"duplicate"`
	Token          *string         `json:"token"`
	Snoozes        int             `json:"snoozes"`
	Worker         *string         `json:"worker"`
	Tags           []string        `json:"tags"`
	Errors         []attemptError  `json:"errors"`
	RunAt          string          `json:"run_at"`
	LeaseExpiresAt *string         `json:"lease_expires_at"`
	UniqueKey      *string         `json:"unique_key"`
	// ParentResults is null unless a claim asked for it and the job has
	// parents.
	ParentResults map[string]json.RawMessage `json:"parent_results"`
}

type attemptError struct {
	Attempt int    `json:"attempt"`
	Message string `json:"message"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timeOf(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func jobOf(w httpapi.Job) job {
	j := job{
		ID: w.ID, Queue: w.Queue, Kind: w.Kind, State: string(w.State), Priority: w.Priority,
		Attempt: w.Attempt, MaxAttempts: w.MaxAttempts, Payload: w.Payload, Group: w.Group,
		Result: w.Result, Duplicate: w.Duplicate, Token: orNull(w.Token), Snoozes: w.Snoozes,
		Worker: orNull(w.Worker), Tags: w.Tags, Errors: []attemptError{}, RunAt: timeOf(w.RunAt),
		UniqueKey: orNull(w.UniqueKey), ParentResults: w.ParentResults,
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	j.Keys = w.Keys
	if j.Keys == nil {
		j.Keys = []string{}
	}
	for _, e := range w.Errors {
		j.Errors = append(j.Errors, attemptError{Attempt: e.Attempt, Message: e.Message})
	}
	if w.LeaseExpiresAt != nil {
		s := timeOf(*w.LeaseExpiresAt)
		j.LeaseExpiresAt = &s
	}
	return j
}

func jobsOf(ws []httpapi.Job) []job {
	out := make([]job, 0, len(ws))
	for _, w := range ws {
		out = append(out, jobOf(w))
	}
	return out
}
