package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

// Request limits that are not in the root package.
const (
	// DefaultLeaseSeconds is the lease of a claim or heartbeat that does
	// not ask for one.
	DefaultLeaseSeconds = 60
	// MaxWaitSeconds caps a claim's long-poll wait.
	MaxWaitSeconds = 300
	// MaxClaimQueues caps how many queues one claim may name.
	MaxClaimQueues = 100
	// MaxTokenLen caps the length of a claim token in a request.
	MaxTokenLen = 1024
	// DefaultMaxBodyBytes is the request body limit when Config leaves it 0.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxBatch is the batch size limit when Config leaves it 0.
	DefaultMaxBatch = 1000
)

// EnqueueRequest is the body of POST /v1/jobs and one element of a batch.
type EnqueueRequest struct {
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Queue       string          `json:"queue,omitempty"`
	Priority    *int            `json:"priority,omitempty"`
	RunAt       *string         `json:"run_at,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
	Group       *string         `json:"group,omitempty"`
	// UniqueKey makes the enqueue idempotent (readpast.EnqueueParams.UniqueKey).
	UniqueKey *string `json:"unique_key,omitempty"`
	// UniqueForSeconds keeps the key held this long after the enqueue,
	// whatever the job's outcome (readpast.EnqueueParams.UniqueFor).
	UniqueForSeconds *float64 `json:"unique_for_seconds,omitempty"`
	// Tags label the job (readpast.EnqueueParams.Tags).
	Tags []string `json:"tags,omitempty"`
}

// batchRequest is the body of POST /v1/jobs/batch. Its elements are decoded
// one by one so errors can name the element.
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// ClaimRequest is the body of POST /v1/claim.
type ClaimRequest struct {
	Worker       string   `json:"worker"`
	Queues       []string `json:"queues,omitempty"`
	Limit        *int     `json:"limit,omitempty"`
	LeaseSeconds *float64 `json:"lease_seconds,omitempty"`
	WaitSeconds  *float64 `json:"wait_seconds,omitempty"`
}

// CompleteRequest is the body of POST /v1/jobs/{id}/complete.
type CompleteRequest struct {
	Token  string          `json:"token"`
	Result json.RawMessage `json:"result,omitempty"`
}

// FailRequest is the body of POST /v1/jobs/{id}/fail.
type FailRequest struct {
	Token   string  `json:"token"`
	Error   *string `json:"error"`
	Stack   string  `json:"stack,omitempty"`
	RetryAt *string `json:"retry_at,omitempty"`
	// Discard fails the job for good whatever attempts remain.
	Discard bool `json:"discard,omitempty"`
}

// HeartbeatRequest is the body of POST /v1/jobs/{id}/heartbeat.
type HeartbeatRequest struct {
	Token        string   `json:"token"`
	LeaseSeconds *float64 `json:"lease_seconds,omitempty"`
}

// ReleaseRequest is the body of POST /v1/jobs/{id}/release.
type ReleaseRequest struct {
	Token string `json:"token"`
}

// SnoozeRequest is the body of POST /v1/jobs/{id}/snooze.
type SnoozeRequest struct {
	Token string `json:"token"`
	// Seconds is how long the job sleeps: 0 to readpast.MaxSnooze.
	Seconds *float64 `json:"seconds"`
}

// BulkRequest is the body of POST /v1/bulk/retry, /cancel and /delete: a
// readpast.JobFilter with at least one field set.
type BulkRequest = readpast.JobFilter

// BulkResponse is the answer to a bulk action: how many jobs it changed,
// and the jobs it matched and skipped because other transactions held
// them (readpast.SkippedError; empty, never null, when there are none).
type BulkResponse struct {
	Count   int     `json:"count"`
	Skipped []int64 `json:"skipped"`
}

// claimArgs is a decoded claim request.
type claimArgs struct {
	Params readpast.ClaimParams
	Wait   time.Duration
}

// failArgs is a decoded fail request. A zero RetryAt means the server's
// retry policy picks it.
type failArgs struct {
	Token   string
	Message string
	Stack   string
	RetryAt time.Time
	Discard bool
}

// decodeObject decodes body, which must be exactly one JSON object, into dst,
// rejecting unknown fields. prefix is put before field names in errors.
func decodeObject(body []byte, dst any, prefix string) *apiError {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		if prefix != "" {
			return fieldError(strings.TrimSuffix(prefix, "."), "must be a JSON object")
		}
		return &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "request body is required"}
	}
	if trimmed[0] != '{' {
		if prefix != "" {
			return fieldError(strings.TrimSuffix(prefix, "."), "must be a JSON object")
		}
		return &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "request body must be a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, prefix)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "unexpected data after the JSON object"}
	}
	return checkKeys(trimmed, dst, prefix)
}

// checkKeys requires the keys of the JSON object body to be exactly the
// JSON names of dst's fields, each at most once. encoding/json alone
// matches names case-insensitively and lets a repeated key win silently,
// which would let two parsers read one body differently.
func checkKeys(body []byte, dst any, prefix string) *apiError {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	known := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			known[name] = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	malformed := &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "malformed JSON object"}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return malformed
	}
	seen := make(map[string]bool, len(known))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed
		}
		key, ok := tok.(string)
		if !ok {
			return malformed
		}
		if !known[key] {
			return fieldError(prefix+fieldName(key), "unknown field")
		}
		if seen[key] {
			return fieldError(prefix+key, "given more than once")
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return malformed
		}
	}
	return nil
}

// jsonError maps an encoding/json error to a 400, naming the JSON field
// where the decoder knows it.
func jsonError(err error, prefix string) *apiError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON,
			Message: fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)}
	case errors.As(err, &typ):
		if typ.Field == "" {
			return &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "request body must be a JSON object"}
		}
		return fieldError(prefix+typ.Field, "must be %s, not %s", typeName(typ.Type), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "unexpected end of JSON input"}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if f, err := strconv.Unquote(name); err == nil {
			name = f
		}
		return fieldError(prefix+fieldName(name), "unknown field")
	}
	return &apiError{Status: http.StatusBadRequest, Code: CodeMalformedJSON, Message: "malformed JSON: " + err.Error()}
}

// fieldName is how an error names a key: as it is, or quoted when it is
// empty.
func fieldName(key string) string {
	if key == "" {
		return `""`
	}
	return key
}

// typeName describes a Go type in JSON terms for error messages.
func typeName(t reflect.Type) string {
	if t == nil {
		return "a different type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer in range"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a different type"
}

// parseTime parses an RFC 3339 time with a year readpast can store.
func parseTime(field, s string) (time.Time, *apiError) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fieldError(field, "must be an RFC 3339 time such as 2025-01-02T15:04:05Z")
	}
	if y := t.Year(); y < 1970 || y > 9999 {
		return time.Time{}, fieldError(field, "year must be between 1970 and 9999")
	}
	return t, nil
}

// parseSeconds turns a number of seconds into a duration within [lo, hi].
func parseSeconds(field string, v *float64, def, lo, hi time.Duration) (time.Duration, *apiError) {
	if v == nil {
		return def, nil
	}
	f := *v
	if math.IsNaN(f) || math.IsInf(f, 0) || f < lo.Seconds() || f > hi.Seconds() {
		return 0, fieldError(field, "must be between %g and %g", lo.Seconds(), hi.Seconds())
	}
	return time.Duration(f * float64(time.Second)), nil
}

// checkToken checks a claim token's presence and size.
func checkToken(token string) *apiError {
	if token == "" {
		return fieldError("token", "is required")
	}
	if len(token) > MaxTokenLen {
		return fieldError("token", "longer than %d bytes", MaxTokenLen)
	}
	return nil
}

// nullToNil treats a JSON null as absent.
func nullToNil(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return raw
}

// toParams validates an enqueue request and fills its defaults. prefix is
// put before field names in errors.
func (req EnqueueRequest) toParams(now time.Time, prefix string) (readpast.EnqueueParams, *apiError) {
	p := readpast.EnqueueParams{
		Kind:    req.Kind,
		Payload: nullToNil(req.Payload),
		Queue:   req.Queue,
	}
	if len(p.Payload) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, p.Payload); err != nil {
			return p, fieldError(prefix+"payload", "not valid JSON")
		}
		p.Payload = buf.Bytes()
	}
	if req.Priority != nil {
		p.Priority = *req.Priority
	}
	if req.MaxAttempts != nil {
		if *req.MaxAttempts == 0 {
			return p, fieldError(prefix+"max_attempts", "must be between 1 and %d", readpast.MaxAttemptsLimit)
		}
		p.MaxAttempts = *req.MaxAttempts
	}
	if req.Group != nil {
		p.Group = *req.Group
	}
	if req.RunAt != nil {
		t, ae := parseTime(prefix+"run_at", *req.RunAt)
		if ae != nil {
			return p, ae
		}
		p.RunAt = t
	}
	if req.UniqueKey != nil {
		if *req.UniqueKey == "" {
			return p, fieldError(prefix+"unique_key", "is empty; leave it out for no key")
		}
		p.UniqueKey = *req.UniqueKey
	}
	p.Tags = req.Tags
	if req.UniqueForSeconds != nil {
		d, ae := parseSeconds(prefix+"unique_for_seconds", req.UniqueForSeconds, 0, time.Second, readpast.MaxUniqueFor)
		if ae != nil {
			return p, ae
		}
		p.UniqueFor = d
	}
	p, err := p.Normalize(now)
	if err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) {
			return p, fromFieldError(fe, func(f string) string {
				if f == "unique_for" {
					f = "unique_for_seconds"
				}
				return prefix + f
			})
		}
		return p, fieldError(strings.TrimSuffix(prefix, "."), "%v", err)
	}
	return p, nil
}

// decodeEnqueue decodes the body of POST /v1/jobs.
func decodeEnqueue(body []byte, now time.Time) (readpast.EnqueueParams, *apiError) {
	var req EnqueueRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return readpast.EnqueueParams{}, ae
	}
	return req.toParams(now, "")
}

// ParseEnqueue decodes and validates one enqueue request exactly as POST
// /v1/jobs does: a JSON object with kind, payload, queue, priority, run_at,
// max_attempts and group. The error names the field at fault.
func ParseEnqueue(data []byte, now time.Time) (readpast.EnqueueParams, error) {
	p, ae := decodeEnqueue(data, now)
	if ae != nil {
		return p, ae
	}
	return p, nil
}

// decodeBatch decodes the body of POST /v1/jobs/batch.
func decodeBatch(body []byte, now time.Time, maxBatch int) ([]readpast.EnqueueParams, *apiError) {
	var req batchRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return nil, ae
	}
	if len(req.Jobs) == 0 {
		return nil, fieldError("jobs", "must hold at least one job")
	}
	if len(req.Jobs) > maxBatch {
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeBatchTooLarge, Field: "jobs",
			Message: fmt.Sprintf("a batch holds at most %d jobs", maxBatch)}
	}
	out := make([]readpast.EnqueueParams, 0, len(req.Jobs))
	for i, raw := range req.Jobs {
		prefix := fmt.Sprintf("jobs[%d].", i)
		var one EnqueueRequest
		if ae := decodeObject(raw, &one, prefix); ae != nil {
			return nil, ae
		}
		p, ae := one.toParams(now, prefix)
		if ae != nil {
			return nil, ae
		}
		out = append(out, p)
	}
	return out, nil
}

// decodeClaim decodes the body of POST /v1/claim.
func decodeClaim(body []byte) (claimArgs, *apiError) {
	var req ClaimRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return claimArgs{}, ae
	}
	if len(req.Queues) > MaxClaimQueues {
		return claimArgs{}, fieldError("queues", "names at most %d queues", MaxClaimQueues)
	}
	if req.Queues != nil && len(req.Queues) == 0 {
		return claimArgs{}, fieldError("queues", `names no queue; leave it out to claim from "default"`)
	}
	p := readpast.ClaimParams{Worker: req.Worker, Queues: req.Queues}
	if req.Limit != nil {
		if *req.Limit == 0 {
			return claimArgs{}, fieldError("limit", "must be between 1 and %d", readpast.MaxClaimLimit)
		}
		p.Limit = *req.Limit
	}
	lease, ae := parseSeconds("lease_seconds", req.LeaseSeconds, DefaultLeaseSeconds*time.Second, time.Millisecond, readpast.MaxLease)
	if ae != nil {
		return claimArgs{}, ae
	}
	p.Lease = lease
	wait, ae := parseSeconds("wait_seconds", req.WaitSeconds, 0, 0, MaxWaitSeconds*time.Second)
	if ae != nil {
		return claimArgs{}, ae
	}
	p, err := p.Normalize()
	if err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) {
			return claimArgs{}, fromFieldError(fe, func(f string) string {
				if f == "lease" {
					return "lease_seconds"
				}
				return f
			})
		}
		return claimArgs{}, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidField, Message: err.Error()}
	}
	return claimArgs{Params: p, Wait: wait}, nil
}

// decodeComplete decodes the body of POST /v1/jobs/{id}/complete.
func decodeComplete(body []byte) (CompleteRequest, *apiError) {
	var req CompleteRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return req, ae
	}
	if ae := checkToken(req.Token); ae != nil {
		return req, ae
	}
	req.Result = nullToNil(req.Result)
	if len(req.Result) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, req.Result); err != nil {
			return req, fieldError("result", "not valid JSON")
		}
		req.Result = buf.Bytes()
		if err := readpast.CheckResult(req.Result); err != nil {
			var fe *readpast.FieldError
			if errors.As(err, &fe) {
				return req, fromFieldError(fe, nil)
			}
			return req, fieldError("result", "%v", err)
		}
	}
	return req, nil
}

// decodeFail decodes the body of POST /v1/jobs/{id}/fail.
func decodeFail(body []byte) (failArgs, *apiError) {
	var req FailRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return failArgs{}, ae
	}
	if ae := checkToken(req.Token); ae != nil {
		return failArgs{}, ae
	}
	if req.Error == nil {
		return failArgs{}, fieldError("error", "is required")
	}
	out := failArgs{Token: req.Token, Message: *req.Error, Stack: req.Stack, Discard: req.Discard}
	if req.RetryAt != nil {
		t, ae := parseTime("retry_at", *req.RetryAt)
		if ae != nil {
			return failArgs{}, ae
		}
		out.RetryAt = t
	}
	return out, nil
}

// decodeHeartbeat decodes the body of POST /v1/jobs/{id}/heartbeat.
func decodeHeartbeat(body []byte) (string, time.Duration, *apiError) {
	var req HeartbeatRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return "", 0, ae
	}
	if ae := checkToken(req.Token); ae != nil {
		return "", 0, ae
	}
	lease, ae := parseSeconds("lease_seconds", req.LeaseSeconds, DefaultLeaseSeconds*time.Second, time.Millisecond, readpast.MaxLease)
	if ae != nil {
		return "", 0, ae
	}
	return req.Token, lease, nil
}

// decodeRelease decodes the body of POST /v1/jobs/{id}/release.
func decodeRelease(body []byte) (string, *apiError) {
	var req ReleaseRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return "", ae
	}
	if ae := checkToken(req.Token); ae != nil {
		return "", ae
	}
	return req.Token, nil
}

// decodeSnooze decodes the body of POST /v1/jobs/{id}/snooze.
func decodeSnooze(body []byte) (string, time.Duration, *apiError) {
	var req SnoozeRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return "", 0, ae
	}
	if ae := checkToken(req.Token); ae != nil {
		return "", 0, ae
	}
	if req.Seconds == nil {
		return "", 0, fieldError("seconds", "is required")
	}
	d, ae := parseSeconds("seconds", req.Seconds, 0, 0, readpast.MaxSnooze)
	if ae != nil {
		return "", 0, ae
	}
	return req.Token, d, nil
}

// decodeBulk decodes the filter of a bulk action.
func decodeBulk(body []byte, action string) (readpast.JobFilter, *apiError) {
	var f BulkRequest
	if ae := decodeObject(body, &f, ""); ae != nil {
		return f, ae
	}
	f, err := f.Normalize(action)
	if err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) {
			return f, fromFieldError(fe, nil)
		}
		return f, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidField, Message: err.Error()}
	}
	return f, nil
}

// decodeEmpty accepts an empty body or an empty JSON object, for endpoints
// that take no parameters.
func decodeEmpty(body []byte) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var req struct{}
	return decodeObject(body, &req, "")
}

// listQueryParams are the query parameters GET /v1/jobs understands.
var listQueryParams = []string{"queue", "state", "kind", "group", "tag", "limit", "cursor", "summary"}

// listArgs is a decoded list query.
type listArgs struct {
	Params readpast.ListParams
	// Summary lists jobs without payload, result and errors.
	Summary bool
}

// decodeListQuery decodes the query of GET /v1/jobs.
func decodeListQuery(rawQuery string) (listArgs, *apiError) {
	p, ae := decodeListFilter(rawQuery)
	if ae != nil {
		return listArgs{}, ae
	}
	q, _ := url.ParseQuery(rawQuery) // decodeListFilter parsed it
	var summary bool
	switch q.Get("summary") {
	case "", "false":
	case "true":
		summary = true
	default:
		return listArgs{}, fieldError("summary", "must be true or false")
	}
	return listArgs{Params: p, Summary: summary}, nil
}

// decodeListFilter decodes the filter and paging parameters of GET /v1/jobs.
func decodeListFilter(rawQuery string) (readpast.ListParams, *apiError) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return readpast.ListParams{}, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidField, Message: "malformed query string"}
	}
	for k, vs := range q {
		if !slices.Contains(listQueryParams, k) {
			return readpast.ListParams{}, fieldError(k, "unknown query parameter")
		}
		if len(vs) > 1 {
			return readpast.ListParams{}, fieldError(k, "given more than once")
		}
		if vs[0] == "" {
			return readpast.ListParams{}, fieldError(k, "is empty; leave the parameter out to not filter by it")
		}
	}
	p := readpast.ListParams{
		Queue:  q.Get("queue"),
		State:  readpast.JobState(q.Get("state")),
		Kind:   q.Get("kind"),
		Group:  q.Get("group"),
		Tag:    q.Get("tag"),
		Cursor: q.Get("cursor"),
	}
	for _, f := range []struct{ name, v string }{{"queue", p.Queue}, {"kind", p.Kind}, {"group", p.Group}, {"tag", p.Tag}} {
		if len(f.v) > readpast.MaxNameLen {
			return readpast.ListParams{}, fieldError(f.name, "longer than %d bytes", readpast.MaxNameLen)
		}
	}
	if s := q.Get("limit"); s != "" {
		n, ok := ParseID(s)
		if !ok || n > 1000 {
			return readpast.ListParams{}, fieldError("limit", "must be between 1 and 1000")
		}
		p.Limit = int(n)
	}
	if p.Cursor != "" {
		if _, ok := ParseID(p.Cursor); !ok {
			return readpast.ListParams{}, fieldError("cursor", "malformed cursor")
		}
	}
	p, err = p.Normalize()
	if err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) {
			return readpast.ListParams{}, fromFieldError(fe, nil)
		}
		return readpast.ListParams{}, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidField, Message: err.Error()}
	}
	return p, nil
}

// parseID parses a job id from the path.
func parseID(s string) (int64, *apiError) {
	id, ok := ParseID(s)
	if !ok {
		return 0, fieldError("id", "must be a positive integer without sign or leading zeros")
	}
	return id, nil
}

// ParseID parses a job id as the API writes them: decimal digits, no
// sign, no leading zeros, at least 1. "+1", "01" and " 1" are not ids.
func ParseID(s string) (int64, bool) {
	if s == "" || s[0] == '0' || strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}
