package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface {
	Scan(dest ...any) error
}

// scanJob reads the 23 columns of liveSelect or historySelect.
func scanJob(r rowScanner) (*readpast.Job, error) {
	return scanJobTraced(r, nil, nil)
}

// scanClaimedJob reads the columns of liveSelect and the job's creation
// context (claimUpdateSQL).
func scanClaimedJob(r rowScanner) (*readpast.Job, error) {
	var traceparent, tracestate sql.NullString
	j, err := scanJobTraced(r, &traceparent, &tracestate)
	if err != nil {
		return nil, err
	}
	j.Traceparent, j.Tracestate = traceparent.String, tracestate.String
	return j, nil
}

// scanJobTraced reads the columns of liveSelect or historySelect, and
// after them into traceparent and tracestate unless they are nil.
func scanJobTraced(r rowScanner, traceparent, tracestate *sql.NullString) (*readpast.Job, error) {
	var (
		j                        readpast.Job
		payload, state, errs     string
		token, worker, group     sql.NullString
		result, uniqueKey, tags  sql.NullString
		runAt, createdAt         int64
		lease, started, finished sql.NullInt64
		uniqueUntil              sql.NullInt64
		moreKeys                 sql.NullString
	)
	dest := make([]any, 0, 25)
	dest = append(dest, &j.ID, &j.Queue, &j.Kind, &payload, &j.Priority, &runAt, &state, &j.Attempt,
		&j.MaxAttempts, &token, &lease, &worker, &group, &createdAt, &started, &errs, &finished, &result,
		&uniqueKey, &uniqueUntil, &tags, &j.Snoozes, &moreKeys)
	if traceparent != nil {
		dest = append(dest, traceparent, tracestate)
	}
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	j.UniqueKey = uniqueKey.String
	j.Tags = splitTags(tags)
	j.UniqueUntil = optTime(uniqueUntil)
	j.Payload = json.RawMessage(payload)
	j.State = readpast.JobState(state)
	j.RunAt = fromMicros(runAt)
	j.Token = token.String
	j.LeaseExpiresAt = optTime(lease)
	j.Worker = worker.String
	if group.Valid {
		g := group.String
		j.Group = &g
	}
	var err error
	if j.Keys, err = jobKeys(group, moreKeys); err != nil {
		return nil, fmt.Errorf("job %d: %w", j.ID, err)
	}
	j.CreatedAt = fromMicros(createdAt)
	j.StartedAt = optTime(started)
	j.FinishedAt = optTime(finished)
	if j.Errors, err = decodeErrors(errs); err != nil {
		return nil, fmt.Errorf("job %d: %w", j.ID, err)
	}
	if result.Valid {
		j.Result = json.RawMessage(result.String)
	}
	return &j, nil
}

// joinTags is the tags column of a job with tags (joined by spaces,
// which no tag contains), NULL for none.
func joinTags(tags []string) any {
	if len(tags) == 0 {
		return nil
	}
	return strings.Join(tags, " ")
}

// splitTags reads a tags column; never nil.
func splitTags(col sql.NullString) []string {
	if !col.Valid || col.String == "" {
		return []string{}
	}
	return strings.Split(col.String, " ")
}

// pairsJSON renders pairs ([tag, job id] for insertTagsSQL and
// dropTagsSQL, [key, job id] for dropKeysSQL) as a JSON array; "" when
// there are none.
func pairsJSON(rows [][2]any) (string, error) {
	if len(rows) == 0 {
		return "", nil
	}
	b, err := json.Marshal(rows)
	return string(b), err
}

// optTime converts a nullable microsecond column.
func optTime(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// decodeErrors parses the errors column; the result is never nil.
func decodeErrors(s string) ([]readpast.AttemptError, error) {
	errs := []readpast.AttemptError{}
	if s == "" {
		return errs, nil
	}
	if err := json.Unmarshal([]byte(s), &errs); err != nil {
		return nil, fmt.Errorf("decode errors column: %w", err)
	}
	if errs == nil {
		errs = []readpast.AttemptError{}
	}
	return errs, nil
}

// appendError adds one attempt error to the errors column's JSON.
func appendError(column string, e readpast.AttemptError) (string, error) {
	errs, err := decodeErrors(column)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(append(errs, e))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// nullString is NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// idsJSON renders ids as a JSON array for json_each.
func idsJSON(ids []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// countsJSON renders per-group counts as a JSON object for json_each.
func countsJSON(m map[string]int) (string, error) {
	b, err := json.Marshal(m)
	return string(b), err
}

// lookup explains why a worker's write (id, token, running) matched nothing:
// ErrNotFound when no job has the id, otherwise ErrStaleToken. A job that
// ended in state repeat (succeeded for a completion, cancelled for a
// worker's cancel; "" for none) under this very token yields nil: an
// idempotent repeat of the write that ended it.
func lookup(ctx context.Context, q querier, id int64, token string, repeat readpast.JobState) error {
	var state, tok string
	err := q.QueryRowContext(ctx, lookupSQL, id).Scan(&state, &tok)
	if errors.Is(err, sql.ErrNoRows) {
		return readpast.ErrNotFound
	}
	if err != nil {
		return err
	}
	if repeat != "" && readpast.JobState(state) == repeat && token != "" && tok == token {
		return nil
	}
	return readpast.ErrStaleToken
}

// isEntryErr reports whether err is a per-entry outcome rather than a
// failure of the whole call.
func isEntryErr(err error) bool {
	return errors.Is(err, readpast.ErrNotFound) || errors.Is(err, readpast.ErrStaleToken)
}

// freeSlots gives back the group slots in freed (group -> jobs that
// stopped running: every key of each job) and marks each group's next
// claimable jobs, and those of the first keys that waited for one of them
// (keys.go). It reports the wake-up its marks call for.
func freeSlots(ctx context.Context, tx *sql.Tx, freed map[string]int, nowUS int64) (wakeup, error) {
	forgot, waiters, err := releaseGroups(ctx, tx, freed, nowUS)
	if err != nil {
		return wakeup{}, err
	}
	groups := withWaiters(slices.Sorted(maps.Keys(freed)), waiters)
	return announceHeads(ctx, tx, groups, forgot, nowUS)
}

// releaseGroups takes freed slots off each group's running count in tx,
// takes the waiters of their rows (to mark: a slot of the key they wait
// for is free), and deletes the rows of the keys left idle, returning
// their max_running: their free slots now. A group that has no row (so
// nothing running) or fewer running jobs than freed means the counters
// drifted: it is an error that rolls tx back, not something to clamp
// away.
func releaseGroups(ctx context.Context, tx *sql.Tx, freed map[string]int, nowUS int64) (forgot map[string]int, waiters []string, err error) {
	if len(freed) == 0 {
		return nil, nil, nil
	}
	js, err := countsJSON(freed)
	if err != nil {
		return nil, nil, err
	}
	rows, err := tx.QueryContext(ctx, groupSubSQL, js)
	if err != nil {
		return nil, nil, fmt.Errorf("free group slots: %w", err)
	}
	n := 0
	var wl waiterList
	for rows.Next() {
		var (
			key string
			ws  sql.NullString
		)
		if err := rows.Scan(&key, &ws); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("free group slots: %w", err)
		}
		n++
		if ws.Valid {
			if err := wl.add(key, ws); err != nil {
				rows.Close()
				return nil, nil, err
			}
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, nil, fmt.Errorf("free group slots: %w", err)
	}
	if n != len(freed) {
		return nil, nil, fmt.Errorf("free group slots: %d of %d groups have a running count: group counters drifted", n, len(freed))
	}
	if waiters, err = wl.take(ctx, tx); err != nil {
		return nil, nil, fmt.Errorf("free group slots: %w", err)
	}
	rows, err = tx.QueryContext(ctx, groupForgetSQL, js, nowUS)
	if err != nil {
		return nil, nil, fmt.Errorf("free group slots: %w", err)
	}
	forgot = map[string]int{}
	for rows.Next() {
		var (
			key  string
			free int
		)
		if err := rows.Scan(&key, &free); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("free group slots: %w", err)
		}
		forgot[key] = free
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, nil, fmt.Errorf("free group slots: %w", err)
	}
	return forgot, waiters, nil
}
