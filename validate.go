package readpast

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxClaimLimit caps how many jobs one claim may take.
const MaxClaimLimit = 10000

// MaxLease caps a lease or extension.
const MaxLease = 24 * time.Hour

// Normalize fills defaults into p and checks every field. now is the time a
// zero RunAt stands for.
func (p EnqueueParams) Normalize(now time.Time) (EnqueueParams, error) {
	if err := checkName("kind", p.Kind, true); err != nil {
		return p, err
	}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if err := checkName("queue", p.Queue, true); err != nil {
		return p, err
	}
	if err := checkName("group", p.Group, false); err != nil {
		return p, err
	}
	keys, err := normalizeKeys(p.Group, p.Keys)
	if err != nil {
		return p, err
	}
	p.Keys = keys
	if len(keys) > 0 {
		p.Group = keys[0]
	}
	if len(p.Payload) == 0 {
		p.Payload = json.RawMessage("{}")
	} else if err := checkJSON("payload", p.Payload); err != nil {
		return p, err
	}
	if p.Priority < MinPriority || p.Priority > MaxPriority {
		return p, invalid("priority", "must be between %d and %d", MinPriority, MaxPriority)
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxAttemptsLimit {
		return p, invalid("max_attempts", "must be between 1 and %d", MaxAttemptsLimit)
	}
	if p.RunAt.IsZero() {
		p.RunAt = now
	}
	if y := p.RunAt.UTC().Year(); y < 1970 || y > 9999 {
		return p, invalid("run_at", "year must be between 1970 and 9999")
	}
	if err := checkUniqueKey(p.UniqueKey); err != nil {
		return p, err
	}
	if p.UniqueFor != 0 && (p.UniqueFor < time.Second || p.UniqueFor > MaxUniqueFor) {
		return p, invalid("unique_for", "must be 0 (none) or between 1s and %s", MaxUniqueFor)
	}
	if p.UniqueFor > 0 && p.UniqueKey == "" {
		return p, invalid("unique_for", "needs a unique_key")
	}
	tags, err := normalizeTags(p.Tags)
	if err != nil {
		return p, err
	}
	p.Tags = tags
	if p.Traceparent != "" || p.Tracestate != "" {
		if p.Traceparent, p.Tracestate, err = normalizeTraceContext(p.Traceparent, p.Tracestate); err != nil {
			return p, err
		}
	}
	return p, nil
}

// normalizeTags checks tags (at most MaxTags names) and drops repeats,
// keeping the first of each. It returns nil for none.
func normalizeTags(tags []string) ([]string, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	out := make([]string, 0, min(len(tags), MaxTags))
	for i, t := range tags {
		if err := checkName("tags", t, true); err != nil {
			var fe *FieldError
			errors.As(err, &fe)
			return nil, invalid("tags", "tag %d (%q) %s", i, t, fe.Message)
		}
		if slices.Contains(out, t) {
			continue // a repeat is kept once, and counts once
		}
		if len(out) == MaxTags {
			return nil, invalid("tags", "more than %d distinct tags", MaxTags)
		}
		out = append(out, t)
	}
	return out, nil
}

// normalizeKeys checks keys (at most MaxKeys distinct names) against the
// group given beside them, which must be empty or the first key, and
// returns the job's keys: keys, or the group alone, or nil for none.
func normalizeKeys(group string, keys []string) ([]string, error) {
	if len(keys) == 0 {
		if group == "" {
			return nil, nil
		}
		return []string{group}, nil
	}
	if len(keys) > MaxKeys {
		return nil, invalid("keys", "%d keys, at most %d allowed", len(keys), MaxKeys)
	}
	if group != "" && group != keys[0] {
		return nil, invalid("keys", "the group (%q) is the first key: give it as keys[0] (%q) or leave it out", group, keys[0])
	}
	for i, k := range keys {
		if err := checkName("keys", k, true); err != nil {
			var fe *FieldError
			errors.As(err, &fe)
			return nil, invalid("keys", "key %d (%q) %s", i, k, fe.Message)
		}
		if slices.Contains(keys[:i], k) {
			return nil, invalid("keys", "key %q given twice", k)
		}
	}
	return slices.Clone(keys), nil
}

// CheckSnooze reports whether d is a usable snooze delay: between 0 and
// MaxSnooze.
func CheckSnooze(d time.Duration) error {
	if d < 0 || d > MaxSnooze {
		return invalid("snooze", "must be between 0 and %s", MaxSnooze)
	}
	return nil
}

// The bulk actions, for JobFilter.Normalize.
const (
	BulkRetryAction  = "retry"
	BulkCancelAction = "cancel"
	BulkDeleteAction = "delete"
)

// BulkStates returns the states bulk action applies to (nil for an
// unknown action).
func BulkStates(action string) []JobState {
	switch action {
	case BulkRetryAction:
		return []JobState{StateFailed, StateCancelled}
	case BulkCancelAction:
		return []JobState{StateBlocked, StatePending, StateRunning}
	case BulkDeleteAction:
		return []JobState{StateSucceeded, StateFailed, StateCancelled}
	}
	return nil
}

// Normalize checks f for bulk action (BulkRetryAction, BulkCancelAction
// or BulkDeleteAction): at least one field set, names valid, and State,
// when set, one the action applies to.
func (f JobFilter) Normalize(action string) (JobFilter, error) {
	states := BulkStates(action)
	if states == nil {
		return f, fmt.Errorf("readpast: unknown bulk action %q", action)
	}
	if f == (JobFilter{}) {
		return f, invalid("filter", "set at least one of queue, kind, state, tag, group (a bulk action never applies to every job by default)")
	}
	for _, c := range []struct{ field, v string }{{"queue", f.Queue}, {"kind", f.Kind}, {"tag", f.Tag}, {"group", f.Group}} {
		if err := checkName(c.field, c.v, false); err != nil {
			return f, err
		}
	}
	if f.State != "" && !slices.Contains(states, f.State) {
		names := make([]string, len(states))
		for i, s := range states {
			names[i] = string(s)
		}
		return f, invalid("state", "bulk %s applies to %s jobs, not %q", action, strings.Join(names, ", "), f.State)
	}
	return f, nil
}

// checkUniqueKey accepts an empty key, or 1..MaxUniqueKeyLen bytes of
// printable characters (spaces included) in valid UTF-8.
func checkUniqueKey(k string) error {
	if k == "" {
		return nil
	}
	if len(k) > MaxUniqueKeyLen {
		return invalid("unique_key", "longer than %d bytes", MaxUniqueKeyLen)
	}
	if !utf8.ValidString(k) || strings.IndexFunc(k, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return invalid("unique_key", "must be printable characters in UTF-8")
	}
	return nil
}

// Normalize fills defaults into p and checks every field.
func (p ClaimParams) Normalize() (ClaimParams, error) {
	if len(p.Queues) == 0 {
		p.Queues = []string{DefaultQueue}
	}
	for _, q := range p.Queues {
		if err := checkName("queues", q, true); err != nil {
			return p, err
		}
	}
	if err := checkName("worker", p.Worker, true); err != nil {
		return p, err
	}
	if p.Limit == 0 {
		p.Limit = 1
	}
	if p.Limit < 1 || p.Limit > MaxClaimLimit {
		return p, invalid("limit", "must be between 1 and %d", MaxClaimLimit)
	}
	if err := CheckLease(p.Lease); err != nil {
		return p, err
	}
	return p, nil
}

// CheckLease reports whether d is a usable lease duration.
func CheckLease(d time.Duration) error {
	if d < time.Millisecond || d > MaxLease {
		return invalid("lease", "must be between 1ms and %s", MaxLease)
	}
	return nil
}

// Normalize fills defaults into p and checks every field.
func (p ListParams) Normalize() (ListParams, error) {
	if p.State != "" && !p.State.Valid() {
		return p, invalid("state", "unknown state %q", p.State)
	}
	for _, c := range []struct{ field, v string }{{"queue", p.Queue}, {"kind", p.Kind}, {"group", p.Group}, {"tag", p.Tag}} {
		if err := checkName(c.field, c.v, false); err != nil {
			return p, err
		}
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > 1000 {
		return p, invalid("limit", "must be between 1 and 1000")
	}
	if p.Cursor != "" {
		if _, err := decodeCursor(p.Cursor); err != nil {
			return p, err
		}
	}
	return p, nil
}

// Normalize fills defaults into p and checks every field.
func (p PruneParams) Normalize() (PruneParams, error) {
	if !p.State.Final() {
		return p, invalid("state", "must be a final state")
	}
	if p.Limit == 0 {
		p.Limit = 1000
	}
	if p.Limit < 1 || p.Limit > 100000 {
		return p, invalid("limit", "must be between 1 and 100000")
	}
	return p, nil
}

// CheckQueue reports whether name is a usable queue name.
func CheckQueue(name string) error { return checkName("queue", name, true) }

// CheckGroupLimit reports whether n is a usable per-group concurrency limit.
func CheckGroupLimit(group string, n int) error {
	if err := checkName("group", group, true); err != nil {
		return err
	}
	if n < 1 || n > 10000 {
		return invalid("limit", "must be between 1 and 10000")
	}
	return nil
}

// checkName accepts 1..MaxNameLen printable characters without spaces, in
// valid UTF-8.
func checkName(field, s string, required bool) error {
	if s == "" {
		if required {
			return invalid(field, "is required")
		}
		return nil
	}
	if len(s) > MaxNameLen {
		return invalid(field, "longer than %d bytes", MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return invalid(field, "not valid UTF-8")
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0 {
		return invalid(field, "must be printable characters without spaces")
	}
	return nil
}

// Limits on what one failed attempt records.
const (
	MaxErrorMessage = 16 << 10
	MaxErrorStack   = 64 << 10
)

// Normalize makes f storable everywhere: message and stack become valid
// UTF-8 without NUL bytes (PostgreSQL text cannot hold them) and are cut
// to MaxErrorMessage and MaxErrorStack bytes.
func (f Failure) Normalize() Failure {
	f.Message = cleanText(f.Message, MaxErrorMessage)
	f.Stack = cleanText(f.Stack, MaxErrorStack)
	return f
}

// Check reports whether f can be stored: a RetryAt, when set, in the
// years 1970 to 9999 in UTC, as a run-at must be (a time outside them
// cannot be written as JSON). The error is a *FieldError for "retry_at";
// the stores give it as the entry's error and change nothing for it.
func (f Failure) Check() error {
	if f.RetryAt.IsZero() {
		return nil
	}
	if y := f.RetryAt.UTC().Year(); y < 1970 || y > 9999 {
		return invalid("retry_at", "year must be between 1970 and 9999")
	}
	return nil
}

func cleanText(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) { // do not cut a rune in half
		s = s[:len(s)-1]
	}
	return s + "…"
}

// CheckResult reports whether a job result can be stored by every store:
// the same rules as a payload's (valid JSON in valid UTF-8 that
// PostgreSQL's jsonb keeps as it is), for field "result". An empty result
// is fine.
func CheckResult(r json.RawMessage) error {
	if len(r) == 0 {
		return nil
	}
	return checkJSON("result", r)
}
