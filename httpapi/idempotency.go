package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"

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
// written (a store may reorder keys and rewrite numbers).
func sameJSON(a, b json.RawMessage) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
