package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// Environment variables the job commands read.
const (
	// envURL stands in for --url.
	envURL = "READPAST_URL"
	// envToken stands in for --token.
	envToken = "READPAST_TOKEN"
)

// defaultURL is where the job commands look for a server when neither a
// URL nor a database is given: `readpast serve`'s default address.
const defaultURL = "http://127.0.0.1:8080"

// defaultTimeout bounds one request of a job command.
const defaultTimeout = 30 * time.Second

// backend is what the job commands (enqueue, jobs, queues, schedules,
// limits, stats) work through:
// the HTTP API of a running server, or a database opened directly.
type backend interface {
	// enqueue enqueues jobs, each the body of POST /v1/jobs, all or none.
	enqueue(ctx context.Context, jobs []json.RawMessage) ([]httpapi.Job, error)
	// list returns one page of jobs as GET /v1/jobs does: each job as the
	// API encodes it, without payload, result and errors when summary.
	list(ctx context.Context, p readpast.ListParams, summary bool) (listPage, error)
	// job runs show, cancel, retry or run on one job.
	job(ctx context.Context, action string, id int64) (httpapi.Job, error)
	// deleteJob deletes one finished job.
	deleteJob(ctx context.Context, id int64) error
	// bulk runs a bulk action (retry, cancel or delete) on the jobs f
	// matches and returns how many it changed.
	bulk(ctx context.Context, action string, f readpast.JobFilter) (int, error)
	// stats counts jobs per queue and state.
	stats(ctx context.Context) (httpapi.StatsResponse, error)
	// queues lists the queues as GET /v1/queues does.
	queues(ctx context.Context) (httpapi.QueuesResponse, error)
	// queue pauses or resumes a queue (action "pause" or "resume").
	queue(ctx context.Context, action, name string) (httpapi.Queue, error)
	// schedules lists every schedule.
	schedules(ctx context.Context) ([]httpapi.Schedule, error)
	// schedule returns one schedule with its latest runs.
	schedule(ctx context.Context, name string) (httpapi.Schedule, error)
	// putSchedule creates or replaces a schedule from the body of PUT
	// /v1/schedules/{name}, and reports whether it created it.
	putSchedule(ctx context.Context, name string, body json.RawMessage) (httpapi.Schedule, bool, error)
	// deleteSchedule deletes a schedule.
	deleteSchedule(ctx context.Context, name string) error
	// pauseSchedule pauses or resumes a schedule.
	pauseSchedule(ctx context.Context, name string, paused bool) (httpapi.Schedule, error)
	// runSchedule enqueues a schedule's job due now and returns the job
	// made; the schedule's ticks are unchanged.
	runSchedule(ctx context.Context, name string) (httpapi.Job, error)
	// limits lists every declared limit with its keys' states.
	limits(ctx context.Context) (httpapi.LimitsResponse, error)
	// limit returns the limit declared for a key or template.
	limit(ctx context.Context, key string) (httpapi.LimitInfo, error)
	// putLimit declares or replaces a limit from the body of PUT
	// /v1/limits/{key}, and reports whether it created it.
	putLimit(ctx context.Context, key string, body json.RawMessage) (httpapi.Limit, bool, error)
	// deleteLimit deletes the limit declared for a key or template.
	deleteLimit(ctx context.Context, key string) error
	// takeTokens takes n starts from a key's rate.
	takeTokens(ctx context.Context, key string, n int) (httpapi.TokenGrant, error)
	// close releases the backend.
	close() error
}

// listPage is one page of a listing, as GET /v1/jobs returns it.
type listPage struct {
	Jobs       []json.RawMessage `json:"jobs"`
	NextCursor *string           `json:"next_cursor"`
}

// targetFlags are the flags that say where a job command sends its work.
type targetFlags struct {
	url      *string
	token    *string
	database *string
	timeout  *time.Duration
}

// addTargetFlags adds --url, --token, --database-url and --timeout to fs.
func addTargetFlags(fs *flagSet) *targetFlags {
	return &targetFlags{
		url: fs.String("url", "", "readpast server to talk to (default $"+envURL+", else "+defaultURL+
			", unless a database is given)"),
		token: fs.String("token", "", "bearer token for the server (default $"+envToken+")"),
		database: fs.String("database-url", "", "work on this database directly instead of through a server: a postgres:// URL or a SQLite file path (default $"+
			envDatabaseURL+" when $"+envURL+" is not set)"),
		timeout: fs.Duration("timeout", defaultTimeout, "how long one request may take"),
	}
}

// target is where a job command sends its work: a server URL (with a
// token), or a database URL.
type target struct {
	url, token, database string
}

// resolve picks the target. A flag wins over the environment: --url (or
// $READPAST_URL) is a server, --database-url (or $READPAST_DATABASE_URL) a
// database. Given both flags, or --token with --database-url, it is a
// usage error. With neither flag, $READPAST_URL wins over
// $READPAST_DATABASE_URL, and with nothing set at all the target is the
// server at defaultURL.
func (f *targetFlags) resolve(getenv func(string) string) (target, error) {
	switch {
	case *f.url != "" && *f.database != "":
		return target{}, usagef("--url and --database-url are two ways to reach the jobs: give one")
	case *f.token != "" && *f.database != "":
		return target{}, usagef("--token is for a server (--url); --database-url opens the database directly")
	case *f.database != "":
		return target{database: *f.database}, nil
	}
	t := target{url: *f.url, token: *f.token}
	if t.token == "" {
		t.token = getenv(envToken)
	}
	if t.url == "" {
		t.url = getenv(envURL)
	}
	if t.url == "" {
		if db := getenv(envDatabaseURL); db != "" && *f.token == "" {
			return target{database: db}, nil
		}
		t.url = defaultURL
	}
	return t, nil
}

// open resolves the target and opens it. readOnly opens a database for
// reading only (commands that change nothing); a database is never created
// or migrated here.
func (f *targetFlags) open(ctx context.Context, readOnly bool) (backend, error) {
	if *f.timeout <= 0 {
		return nil, usagef("--timeout must be positive")
	}
	t, err := f.resolve(os.Getenv)
	if err != nil {
		return nil, err
	}
	if t.database != "" {
		ctx, cancel := context.WithTimeout(ctx, *f.timeout)
		defer cancel()
		st, err := openExisting(ctx, t.database, readOnly)
		if err != nil {
			return nil, err
		}
		return &direct{store: st, timeout: *f.timeout}, nil
	}
	return newRemote(t.url, t.token, *f.timeout)
}

// describeJobError words err from action (show, cancel, retry, run) on job id
// for people.
func describeJobError(action string, id int64, err error) error {
	switch {
	case errors.Is(err, readpast.ErrNotFound):
		return fmt.Errorf("job %d not found", id)
	case errors.Is(err, readpast.ErrInvalidState):
		return fmt.Errorf("cannot %s job %d in its state (see 'readpast jobs show %d')", action, id, id)
	}
	return fmt.Errorf("%s job %d: %w", action, id, err)
}
