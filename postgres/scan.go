package postgres

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/readpast/readpast"
)

// scanner is what pgx.Row, pgx.Rows and *sql.Rows have in common.
type scanner interface {
	Scan(dest ...any) error
}

// scanJob reads the 23 job columns every job-returning statement selects,
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
	j                       readpast.Job
	payload, errs, result   []byte
	state                   string
	group, token, worker    *string
	uniqueKey, tags         *string
	traceparent, tracestate *string
	moreKeys                *string
	dest                    []any
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
		&j.FinishedAt, &js.errs, &js.result, &js.uniqueKey, &j.UniqueUntil, &js.tags, &j.Snoozes, &js.moreKeys)
	if err := r.Scan(js.dest...); err != nil {
		return nil, err
	}
	out := new(readpast.Job)
	if err := js.fill(out); err != nil {
		return nil, err
	}
	return out, nil
}

// scanClaim reads one job's row of a claim (the claim_result fragment)
// into j: the columns that differ from job to job. scanClaimed sets the
// rest.
func (js *jobScanner) scanClaim(r scanner, j *readpast.Job) error {
	*js = jobScanner{dest: js.dest[:0]}
	s := &js.j
	js.dest = append(js.dest[:0], &s.ID, &s.Queue, &s.Kind, &js.payload, &s.Priority, &s.Attempt, &s.MaxAttempts,
		&s.RunAt, &js.group, &s.CreatedAt, &s.StartedAt, &js.errs, &js.uniqueKey, &s.UniqueUntil, &js.tags, &s.Snoozes,
		&js.traceparent, &js.tracestate, &js.moreKeys, nil) // due: NULL on a job's row
	if err := r.Scan(js.dest...); err != nil {
		return err
	}
	if err := js.fill(j); err != nil {
		return err
	}
	if js.traceparent != nil {
		j.Traceparent = *js.traceparent
	}
	if js.tracestate != nil {
		j.Tracestate = *js.tracestate
	}
	return nil
}

// fill converts the scanned columns into j.
func (js *jobScanner) fill(j *readpast.Job) error {
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
	if js.group != nil {
		// Statements return the keys after the first joined by spaces,
		// as they do tags.
		j.Keys = []string{*js.group}
		if js.moreKeys != nil && *js.moreKeys != "" {
			j.Keys = append(j.Keys, strings.Split(*js.moreKeys, " ")...)
		}
	}
	if js.token != nil {
		j.Token = *js.token
	}
	if js.worker != nil {
		j.Worker = *js.worker
	}
	j.Errors = []readpast.AttemptError{}
	if len(js.errs) > 0 && string(js.errs) != "[]" { // most jobs have none: skip the decoder
		if err := json.Unmarshal(js.errs, &j.Errors); err != nil {
			return fmt.Errorf("job %d: decode errors: %w", j.ID, err)
		}
	}
	j.RunAt = j.RunAt.UTC()
	j.CreatedAt = j.CreatedAt.UTC()
	// In place: pgx allocated each of these for this row (scan starts
	// every destination empty).
	for _, t := range []*time.Time{j.LeaseExpiresAt, j.StartedAt, j.FinishedAt, j.UniqueUntil} {
		if t != nil {
			*t = t.UTC()
		}
	}
	return nil
}

// claimChunk is how many jobs of a claim scanClaimed allocates at once.
const claimChunk = 64

// scanClaimed reads the rows of a claim of p under token (sql/claim.sql,
// the claim_result fragment) and sets what the claim set on every job
// alike, which the rows leave out: state running, the token, the worker,
// and the lease from the claim's time. Jobs are allocated claimChunk at a
// time rather than one by one. The rows whose id is NULL are the claim's
// notes (claim_result_due): due is the payload of the one that lists the
// next starts of the keys the claim left out of tokens, or ""; passed is
// the job id of the one that says "more:" (the first keyed job the claim
// passed over that may be claimable now: claimmore.go), or 0.
func scanClaimed(rows pgx.Rows, p readpast.ClaimParams, token string) (jobs []*readpast.Job, due string, passed int64, err error) {
	var (
		js    jobScanner
		chunk []readpast.Job
	)
	lease := time.Duration(p.Lease.Microseconds()) * time.Microsecond // as the statement reckons it
	for rows.Next() {
		if raw := rows.RawValues(); len(raw) > 0 && raw[0] == nil {
			note := string(raw[len(raw)-1]) // text: the same bytes in either format
			if id, ok := strings.CutPrefix(note, morePrefix); ok {
				passed, _ = strconv.ParseInt(id, 10, 64)
			} else {
				due = note
			}
			continue
		}
		if len(chunk) == 0 {
			chunk = make([]readpast.Job, min(claimChunk, max(p.Limit-len(jobs), 1)))
		}
		j := &chunk[0]
		chunk = chunk[1:]
		if err := js.scanClaim(rows, j); err != nil {
			return nil, "", 0, err
		}
		if j.StartedAt == nil {
			return nil, "", 0, fmt.Errorf("claimed job %d: no started_at", j.ID)
		}
		until := j.StartedAt.Add(lease)
		j.State, j.Token, j.Worker, j.LeaseExpiresAt = readpast.StateRunning, token, p.Worker, &until
		jobs = append(jobs, j)
	}
	return jobs, due, passed, rows.Err()
}
