package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

// scanner is what pgx.Row, pgx.Rows and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}

// scanJob reads the 22 job columns every job-returning statement selects,
// in the order of sql/get.sql.
func scanJob(r scanner) (*readpast.Job, error) {
	return scanJobAfter(r)
}

// scanJobAfter reads the job columns after the columns of dest, which
// come first in the row.
func scanJobAfter(r scanner, dest ...any) (*readpast.Job, error) {
	var js jobScanner
	return js.scan(r, dest...)
}

// jobScanner reads job rows one after another. It holds the columns that
// need converting after the scan, and the scan's destinations, so that
// reading many rows (a claim of hundreds) allocates them once rather than
// once a row: those allocations were a third of the row-reading CPU in a
// 1000-worker drain. Every value kept from a row is a copy (pgx copies
// into []byte and string destinations), so nothing aliases the next row.
type jobScanner struct {
	j                     readpast.Job
	payload, errs, result []byte
	state                 string
	group, token, worker  *string
	uniqueKey, tags       *string
	dest                  []any
}

// scan reads one row: the columns of extra first, then the job's.
func (js *jobScanner) scan(r scanner, extra ...any) (*readpast.Job, error) {
	// Every destination starts empty, so that pgx allocates each value
	// afresh: a destination that still pointed at the last row's value
	// could be written through, into the job returned for that row.
	*js = jobScanner{dest: js.dest[:0]}
	j := &js.j
	js.dest = append(append(js.dest[:0], extra...), &j.ID, &j.Queue, &j.Kind, &js.payload, &j.Priority, &js.state, &j.Attempt, &j.MaxAttempts,
		&j.RunAt, &js.group, &js.token, &j.LeaseExpiresAt, &js.worker, &j.CreatedAt, &j.StartedAt,
		&j.FinishedAt, &js.errs, &js.result, &js.uniqueKey, &j.UniqueUntil, &js.tags, &j.Snoozes)
	if err := r.Scan(js.dest...); err != nil {
		return nil, err
	}
	return js.job()
}

// job converts the scanned columns into a Job of its own.
func (js *jobScanner) job() (*readpast.Job, error) {
	j := new(readpast.Job)
	*j = js.j
	if js.uniqueKey != nil {
		j.UniqueKey = *js.uniqueKey
	}
	// Statements return the tags joined by spaces (array_to_string),
	// which no tag contains: one text column reads the same through pgx
	// and database/sql.
	j.Tags = []string{}
	if js.tags != nil && *js.tags != "" {
		j.Tags = strings.Split(*js.tags, " ")
	}
	j.State = readpast.JobState(js.state)
	j.Payload = json.RawMessage(js.payload)
	if len(js.result) > 0 {
		j.Result = json.RawMessage(js.result)
	}
	j.Group = js.group
	if js.token != nil {
		j.Token = *js.token
	}
	if js.worker != nil {
		j.Worker = *js.worker
	}
	j.Errors = []readpast.AttemptError{}
	if len(js.errs) > 0 && string(js.errs) != "[]" { // most jobs have none: skip the decoder
		if err := json.Unmarshal(js.errs, &j.Errors); err != nil {
			return nil, fmt.Errorf("job %d: decode errors: %w", j.ID, err)
		}
	}
	j.RunAt = j.RunAt.UTC()
	j.CreatedAt = j.CreatedAt.UTC()
	for _, t := range []**time.Time{&j.LeaseExpiresAt, &j.StartedAt, &j.FinishedAt, &j.UniqueUntil} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	return j, nil
}
