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
	var (
		j                     readpast.Job
		payload, errs, result []byte
		state                 string
		group, token, worker  *string
		uniqueKey, tags       *string
	)
	err := r.Scan(append(dest, &j.ID, &j.Queue, &j.Kind, &payload, &j.Priority, &state, &j.Attempt, &j.MaxAttempts,
		&j.RunAt, &group, &token, &j.LeaseExpiresAt, &worker, &j.CreatedAt, &j.StartedAt,
		&j.FinishedAt, &errs, &result, &uniqueKey, &j.UniqueUntil, &tags, &j.Snoozes)...)
	if err != nil {
		return nil, err
	}
	if uniqueKey != nil {
		j.UniqueKey = *uniqueKey
	}
	// Statements return the tags joined by spaces (array_to_string),
	// which no tag contains: one text column reads the same through pgx
	// and database/sql.
	j.Tags = []string{}
	if tags != nil && *tags != "" {
		j.Tags = strings.Split(*tags, " ")
	}
	j.State = readpast.JobState(state)
	j.Payload = json.RawMessage(payload)
	if len(result) > 0 {
		j.Result = json.RawMessage(result)
	}
	j.Group = group
	if token != nil {
		j.Token = *token
	}
	if worker != nil {
		j.Worker = *worker
	}
	j.Errors = []readpast.AttemptError{}
	if len(errs) > 0 && string(errs) != "[]" { // most jobs have none: skip the decoder
		if err := json.Unmarshal(errs, &j.Errors); err != nil {
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
	return &j, nil
}
