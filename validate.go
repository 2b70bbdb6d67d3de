package readpast

import (
	"bytes"
	"encoding/json"
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
	if len(p.Payload) == 0 {
		p.Payload = json.RawMessage("{}")
	} else if !json.Valid(p.Payload) {
		return p, invalid("payload", "not valid JSON")
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
	if y := p.RunAt.Year(); y < 1970 || y > 9999 {
		return p, invalid("run_at", "year must be between 1970 and 9999")
	}
	return p, nil
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
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > 1000 {
		return p, invalid("limit", "must be between 1 and 1000")
	}
	if p.Cursor != "" {
		if _, err := DecodeCursor(p.Cursor); err != nil {
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

// checkName accepts 1..MaxNameLen printable characters without spaces.
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
// valid JSON without the \u0000 escape, which PostgreSQL's jsonb rejects.
func CheckResult(r json.RawMessage) error {
	if len(r) == 0 {
		return nil
	}
	if !json.Valid(r) {
		return invalid("result", "not valid JSON")
	}
	if hasNULEscape(r) {
		return invalid("result", `contains \u0000, which cannot be stored`)
	}
	return nil
}

// hasNULEscape reports whether valid JSON r holds the escape \u0000. In
// valid JSON a backslash only starts an escape, so reading escapes left to
// right tells "\u0000" (a NUL) from "\\u0000" (a backslash, then text).
func hasNULEscape(r []byte) bool {
	if !bytes.Contains(r, []byte(`\u0000`)) {
		return false
	}
	for i := 0; i < len(r); i++ {
		if r[i] != '\\' {
			continue
		}
		if bytes.HasPrefix(r[i+1:], []byte("u0000")) {
			return true
		}
		i++ // skip the escaped character
	}
	return false
}
