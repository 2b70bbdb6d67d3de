package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/readpast/readpast"
)

// IdempotencyKeyPrefix is put before an Idempotency-Key header's value to
// make the job's unique key, so that the two kinds of keys never meet.
const IdempotencyKeyPrefix = "idempotency:"

// MaxIdempotencyKeyLen caps an Idempotency-Key header's value.
const MaxIdempotencyKeyLen = readpast.MaxUniqueKeyLen - len(IdempotencyKeyPrefix)

// idempotencyKey applies the Idempotency-Key header of r, if any, to p:
// the job's unique key becomes the header's value (prefixed), held for
// the server's idempotency period whatever the job's outcome, so that a
// client may send the same request again after losing the answer.
func (s *server) idempotencyKey(r *http.Request, p *readpast.EnqueueParams) *apiError {
	vs := r.Header.Values("Idempotency-Key")
	switch {
	case len(vs) == 0:
		return nil
	case len(vs) > 1:
		return fieldError("Idempotency-Key", "given more than once")
	case vs[0] == "":
		return fieldError("Idempotency-Key", "is empty")
	case len(vs[0]) > MaxIdempotencyKeyLen:
		return fieldError("Idempotency-Key", "longer than %d bytes", MaxIdempotencyKeyLen)
	case p.UniqueKey != "":
		return fieldError("Idempotency-Key", "the body has a unique_key: give one or the other")
	}
	q := *p
	q.UniqueKey, q.UniqueFor = IdempotencyKeyPrefix+vs[0], s.idemFor
	q, err := q.Normalize(s.now())
	if err != nil {
		return fieldError("Idempotency-Key", "must be printable characters")
	}
	*p = q
	return nil
}

// idempotentReplay checks that an enqueue whose Idempotency-Key a job
// already holds asks for that job: the same kind, queue, payload,
// priority, max attempts, keys and tags. A different request under a
// reused key is a client's mistake, answered 422 without changing
// anything, rather than a job that is not the one it asked for. A run-at
// is not compared: left out, it is the time of each request.
func idempotentReplay(r *http.Request, p readpast.EnqueueParams, j *readpast.Job) *apiError {
	if len(r.Header.Values("Idempotency-Key")) == 0 {
		return nil
	}
	differs := ""
	switch {
	case p.Kind != j.Kind:
		differs = "kind"
	case p.Queue != j.Queue:
		differs = "queue"
	case !sameJSON(p.Payload, j.Payload):
		differs = "payload"
	case p.Priority != j.Priority:
		differs = "priority"
	case p.MaxAttempts != j.MaxAttempts:
		differs = "max_attempts"
	case !slices.Equal(p.Keys, j.Keys):
		differs = "keys"
	case !sameSet(p.Tags, j.Tags):
		differs = "tags"
	default:
		return nil
	}
	return &apiError{Status: http.StatusUnprocessableEntity, Code: CodeIdempotencyMismatch, Field: differs,
		Message: "this Idempotency-Key was used for job " + strconv.FormatInt(j.ID, 10) + ", whose " + differs +
			" differs from this request's: send the same request again, or use a new key; nothing changed"}
}

// sameJSON reports whether a and b hold the same JSON value, however
// written: a store may reorder keys and write numbers out in full (1e2 as
// 100), so numbers compare by their exact decimal value, not as float64
// (which would make 9007199254740993 and 9007199254740992 one number).
func sameJSON(a, b json.RawMessage) bool {
	va, okA := decodeExact(a)
	vb, okB := decodeExact(b)
	return okA && okB && reflect.DeepEqual(va, vb)
}

// decodeExact decodes a JSON value with each number as canonNumber
// writes it.
func decodeExact(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return canonNumbers(v), true
}

func canonNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = canonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonNumbers(e)
		}
	case json.Number:
		return canonNumber(string(x))
	}
	return v
}

// canonNumber writes the JSON number s as its significant digits and a
// power of ten ("-15e-1" for -1.50), "0" for zero. Exponents are small:
// payloads' numbers are within PostgreSQL's range (readpast.CheckJSON).
func canonNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(s, "-")), "e")
	e, _ := strconv.Atoi(exp)
	whole, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	e -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return "0"
	}
	e += len(digits) - len(trimmed)
	out := trimmed + "e" + strconv.Itoa(e)
	if neg {
		out = "-" + out
	}
	return out
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
