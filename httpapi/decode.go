package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

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
// JSON names of dst's fields, each at most once, and their values to
// follow readpast.CheckJSON (valid UTF-8, no unpaired surrogate escape).
// encoding/json alone matches names case-insensitively, lets a repeated
// key win silently and turns invalid UTF-8 and "\ud800" into U+FFFD (so
// "u\xfe", "u\xff" and "u\ud800" would name one key), which would let two
// parsers read one body differently.
func checkKeys(body []byte, dst any, prefix string) *apiError {
	t := reflect.TypeOf(dst)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	known := make(map[string]bool, t.NumField()) // whether to check the value
	var nonEmpty []string                        // fields tagged empty:"no"
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			known[name] = f.Type != rawType && f.Type != rawsType && f.Tag.Get("text") != "free"
			if f.Tag.Get("empty") == "no" {
				nonEmpty = append(nonEmpty, name)
			}
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
		check, ok := known[key]
		if !ok {
			return fieldError(prefix+fieldName(key), "unknown field")
		}
		if seen[key] {
			return fieldError(prefix+key, "given more than once")
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return malformed
		}
		if string(value) == `""` && slices.Contains(nonEmpty, key) {
			// Read as left out, "" would mean the default silently.
			return fieldError(prefix+key, "must not be empty: leave it out for the default")
		}
		if check {
			if err := readpast.CheckJSON(prefix+key, value); err != nil {
				var fe *readpast.FieldError
				errors.As(err, &fe)
				return fromFieldError(fe, nil)
			}
		}
	}
	return nil
}

// rawType and rawsType are the types of the fields checkKeys leaves raw:
// their values are checked where they are decoded, under their own names
// (a payload by readpast's JSON rules, a nested object by decodeObject).
// Fields tagged text:"free" (an error message) are not checked either:
// their text is cleaned where it is stored.
var (
	rawType  = reflect.TypeFor[json.RawMessage]()
	rawsType = reflect.TypeFor[[]json.RawMessage]()
)

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
	// Go also reads a decimal comma and offsets of 24 hours, which RFC
	// 3339 has not: "+24:00" would be a day off.
	if _, off := t.Zone(); err != nil || strings.ContainsRune(s, ',') || off <= -24*3600 || off >= 24*3600 {
		return time.Time{}, fieldError(field, "must be an RFC 3339 time such as 2025-01-02T15:04:05Z")
	}
	if y := t.UTC().Year(); y < 1970 || y > 9999 {
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
		return 0, fieldError(field, "must be between %s and %s seconds (%s)",
			strconv.FormatFloat(lo.Seconds(), 'f', -1, 64), strconv.FormatFloat(hi.Seconds(), 'f', -1, 64), hi)
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
	p.Keys = req.Keys
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
		if strings.HasPrefix(*req.UniqueKey, IdempotencyKeyPrefix) {
			return p, fieldError(prefix+"unique_key", "may not start with %q, which keys from Idempotency-Key headers take", IdempotencyKeyPrefix)
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
// max_attempts, group, keys, unique_key, unique_for_seconds and tags. The
// error names the field at fault.
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
	return claimArgs{Params: p, Wait: wait, ParentResults: req.ParentResults}, nil
}

// decodeComplete decodes the body of POST /v1/jobs/{id}/complete.
func decodeComplete(body []byte) (CompleteRequest, *apiError) {
	var req CompleteRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return req, ae
	}
	return req, checkComplete(&req)
}

// checkComplete checks a completion's token and result, compacting the
// result (a JSON null is none); shared by the single and batch completions.
func checkComplete(req *CompleteRequest) *apiError {
	if ae := checkToken(req.Token); ae != nil {
		return ae
	}
	req.Result = nullToNil(req.Result)
	if len(req.Result) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, req.Result); err != nil {
			return fieldError("result", "not valid JSON")
		}
		req.Result = buf.Bytes()
		if err := readpast.CheckResult(req.Result); err != nil {
			var fe *readpast.FieldError
			if errors.As(err, &fe) {
				return fromFieldError(fe, nil)
			}
			return fieldError("result", "%v", err)
		}
	}
	return nil
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

// decodeCancel decodes the optional body of POST /v1/jobs/{id}/cancel:
// the token it names, "" when it names none (no body, {}, a null token).
func decodeCancel(body []byte) (string, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	var req CancelRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return "", ae
	}
	if req.Token == nil {
		return "", nil
	}
	if ae := checkToken(*req.Token); ae != nil {
		return "", ae
	}
	return *req.Token, nil
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
	// An empty filter would match every job: as for GET /v1/jobs?queue=,
	// a filter given empty is refused rather than left out.
	var given struct{ Queue, Kind, State, Tag, Group *string }
	if err := json.Unmarshal(body, &given); err == nil {
		for _, g := range []struct {
			name string
			v    *string
		}{{"queue", given.Queue}, {"kind", given.Kind}, {"state", given.State}, {"tag", given.Tag}, {"group", given.Group}} {
			if g.v != nil && *g.v == "" {
				return f, fieldError(g.name, "must not be empty (leave the field out to match every value)")
			}
		}
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
