package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// errTooLarge is what a server answers a batch or body over its limits
// with (413); the enqueue command sends smaller batches then.
var errTooLarge = errors.New("request too large for the server")

// remote is a backend that talks to a readpast server's HTTP API.
type remote struct {
	base  string // the server URL without a trailing slash
	token string
	hc    *http.Client
}

// newRemote returns a backend for the server at rawURL.
func newRemote(rawURL, token string, timeout time.Duration) (*remote, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, usagef("server URL %q: want http://HOST:PORT or https://HOST:PORT", rawURL)
	}
	return &remote{
		base:  strings.TrimSuffix(u.String(), "/"),
		token: token,
		hc:    &http.Client{Timeout: timeout},
	}, nil
}

func (c *remote) close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// remoteError is an error response of the server.
type remoteError struct {
	status int
	detail httpapi.ErrorDetail
}

func (e *remoteError) Error() string {
	msg := e.detail.Message
	if e.detail.Field != "" {
		msg = e.detail.Field + ": " + msg
	}
	switch e.detail.Code {
	case httpapi.CodeUnauthorized:
		msg += "; give the server's token with --token or $" + envToken
	case httpapi.CodeForbidden:
		msg += "; this needs a full-access token"
	}
	return fmt.Sprintf("%s (HTTP %d %s)", msg, e.status, e.detail.Code)
}

// Is lets callers branch on server errors with readpast's sentinels.
func (e *remoteError) Is(target error) bool {
	switch e.detail.Code {
	case httpapi.CodeNotFound:
		// Not an unknown route, which is also 404 not_found.
		return (target == readpast.ErrNotFound && e.detail.Message == "job not found") ||
			(target == readpast.ErrScheduleNotFound && e.detail.Message == "schedule not found") ||
			(target == readpast.ErrLimitNotFound && e.detail.Message == "limit not found")
	case httpapi.CodeStaleToken:
		return target == readpast.ErrStaleToken
	case httpapi.CodeInvalidState:
		return target == readpast.ErrInvalidState
	case httpapi.CodeInvalidField:
		return target == readpast.ErrInvalid
	case httpapi.CodeUnavailable:
		return target == readpast.ErrUnavailable
	case httpapi.CodeTooLarge, httpapi.CodeBatchTooLarge:
		return target == errTooLarge
	}
	return false
}

// do sends a request with body (JSON-encoded unless nil) and decodes a 2xx
// response into out.
func (c *remote) do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.doStatus(ctx, method, path, body, out)
	return err
}

// doStatus is do that also returns the response's status.
func (c *remote) doStatus(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, c.unreachable(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%w: reading the answer of %s: %w", readpast.ErrUnavailable, c.base, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb httpapi.ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
			return resp.StatusCode, fmt.Errorf("%s answered HTTP %d: %.200s (is it a readpast server?)", c.base, resp.StatusCode, bytes.TrimSpace(b))
		}
		return resp.StatusCode, &remoteError{status: resp.StatusCode, detail: eb.Error}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s answered %.100s: %w (is it a readpast server?)", c.base, bytes.TrimSpace(b), err)
		}
	}
	return resp.StatusCode, nil
}

// unreachable words an error that got no answer from the server.
func (c *remote) unreachable(err error) error {
	var hint string
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		hint = "; is 'readpast serve' running there? Name another server with --url or $" + envURL +
			", or open a database directly with --database-url"
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		hint = fmt.Sprintf("; no answer within %s (--timeout)", c.hc.Timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%w: cannot reach the readpast server at %s: %w%s", readpast.ErrUnavailable, c.base, err, hint)
}

func (c *remote) enqueue(ctx context.Context, jobs []json.RawMessage) ([]httpapi.Job, error) {
	if len(jobs) == 1 {
		var j httpapi.Job
		if err := c.do(ctx, http.MethodPost, "/v1/jobs", jobs[0], &j); err != nil {
			return nil, err
		}
		return []httpapi.Job{j}, nil
	}
	var out httpapi.JobsResponse
	if err := c.do(ctx, http.MethodPost, "/v1/jobs/batch", map[string]any{"jobs": jobs}, &out); err != nil {
		return nil, err
	}
	if len(out.Jobs) != len(jobs) {
		return nil, fmt.Errorf("the server enqueued %d jobs for %d sent", len(out.Jobs), len(jobs))
	}
	return out.Jobs, nil
}

func (c *remote) list(ctx context.Context, p readpast.ListParams, summary bool) (listPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"queue": p.Queue, "state": string(p.State), "kind": p.Kind, "group": p.Group, "tag": p.Tag, "cursor": p.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if summary {
		q.Set("summary", "true")
	}
	var page listPage
	err := c.do(ctx, http.MethodGet, "/v1/jobs?"+q.Encode(), nil, &page)
	return page, err
}

func (c *remote) job(ctx context.Context, action string, id int64) (httpapi.Job, error) {
	path := "/v1/jobs/" + strconv.FormatInt(id, 10)
	method := http.MethodGet
	if action != "show" {
		method, path = http.MethodPost, path+"/"+action
	}
	var j httpapi.Job
	err := c.do(ctx, method, path, nil, &j)
	return j, err
}

func (c *remote) deleteJob(ctx context.Context, id int64) error {
	return c.do(ctx, http.MethodDelete, "/v1/jobs/"+strconv.FormatInt(id, 10), nil, nil)
}

func (c *remote) bulk(ctx context.Context, action string, f readpast.JobFilter) (int, error) {
	var res httpapi.BulkResponse
	err := c.do(ctx, http.MethodPost, "/v1/bulk/"+action, f, &res)
	if err == nil && len(res.Skipped) > 0 {
		err = &readpast.SkippedError{Action: action, IDs: res.Skipped}
	}
	return res.Count, err
}

func (c *remote) stats(ctx context.Context) (httpapi.StatsResponse, error) {
	var st httpapi.StatsResponse
	err := c.do(ctx, http.MethodGet, "/v1/stats", nil, &st)
	return st, err
}

func (c *remote) queues(ctx context.Context) (httpapi.QueuesResponse, error) {
	var res httpapi.QueuesResponse
	err := c.do(ctx, http.MethodGet, "/v1/queues", nil, &res)
	return res, err
}

func (c *remote) queue(ctx context.Context, action, name string) (httpapi.Queue, error) {
	var q httpapi.Queue
	err := c.do(ctx, http.MethodPost, "/v1/queues/"+url.PathEscape(name)+"/"+action, nil, &q)
	return q, err
}

func schedulePath(name string) string { return "/v1/schedules/" + url.PathEscape(name) }

func (c *remote) schedules(ctx context.Context) ([]httpapi.Schedule, error) {
	var out httpapi.SchedulesResponse
	err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, &out)
	return out.Schedules, err
}

func (c *remote) schedule(ctx context.Context, name string) (httpapi.Schedule, error) {
	var out httpapi.Schedule
	err := c.do(ctx, http.MethodGet, schedulePath(name), nil, &out)
	return out, err
}

func (c *remote) putSchedule(ctx context.Context, name string, body json.RawMessage) (httpapi.Schedule, bool, error) {
	var out httpapi.Schedule
	status, err := c.doStatus(ctx, http.MethodPut, schedulePath(name), body, &out)
	return out, status == http.StatusCreated, err
}

func (c *remote) deleteSchedule(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, schedulePath(name), nil, nil)
}

func (c *remote) pauseSchedule(ctx context.Context, name string, paused bool) (httpapi.Schedule, error) {
	verb := "/resume"
	if paused {
		verb = "/pause"
	}
	var out httpapi.Schedule
	err := c.do(ctx, http.MethodPost, schedulePath(name)+verb, nil, &out)
	return out, err
}

func (c *remote) runSchedule(ctx context.Context, name string) (httpapi.Job, error) {
	var out httpapi.Job
	err := c.do(ctx, http.MethodPost, schedulePath(name)+"/run", nil, &out)
	return out, err
}

// limitPath is the path of the limit of key: the key as one path segment,
// escaped ("a/b" is a%2Fb; "." and ".." are escaped too, which a server
// would otherwise take for the folders of the path).
func limitPath(key string) string {
	seg := url.PathEscape(key)
	if seg == "." || seg == ".." {
		seg = strings.ReplaceAll(seg, ".", "%2E")
	}
	return "/v1/limits/" + seg
}

func (c *remote) limits(ctx context.Context) (httpapi.LimitsResponse, error) {
	var out httpapi.LimitsResponse
	err := c.do(ctx, http.MethodGet, "/v1/limits", nil, &out)
	return out, err
}

func (c *remote) limit(ctx context.Context, key string) (httpapi.LimitInfo, error) {
	var out httpapi.LimitInfo
	err := c.do(ctx, http.MethodGet, limitPath(key), nil, &out)
	return out, err
}

func (c *remote) putLimit(ctx context.Context, key string, body json.RawMessage) (httpapi.Limit, bool, error) {
	var out httpapi.Limit
	status, err := c.doStatus(ctx, http.MethodPut, limitPath(key), body, &out)
	return out, status == http.StatusCreated, err
}

func (c *remote) deleteLimit(ctx context.Context, key string) error {
	return c.do(ctx, http.MethodDelete, limitPath(key), nil, nil)
}

func (c *remote) takeTokens(ctx context.Context, key string, n int) (httpapi.TokenGrant, error) {
	var out httpapi.TokenGrant
	err := c.do(ctx, http.MethodPost, limitPath(key)+"/tokens", httpapi.TakeTokensRequest{N: &n}, &out)
	return out, err
}
