package httpapi

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/readpast/readpast"
)

// Limit is the wire form of a declared limit (readpast.Limit): the key or
// template ("prefix*") it is declared for, how many of a key's jobs may
// run at once (0: no bound), how many may start per period, and its
// weight among the keys that take turns (1 to readpast.MaxWeight). A
// limit without a rate has rate, per_seconds and burst 0.
type Limit struct {
	Key         string `json:"key"`
	Concurrency int    `json:"concurrency"`
	Rate        int    `json:"rate"`
	// PerSeconds is the period of Rate, in seconds.
	PerSeconds float64 `json:"per_seconds"`
	Burst      int     `json:"burst"`
	// Weight is how many of the key's jobs a claim takes in each of its
	// rounds: keys with backlogs and more weight start more jobs.
	Weight int `json:"weight"`
}

// LimitInfo is a limit with the states of the keys it governs that have
// a bucket (up to readpast.MaxLimitKeys, by key): each limit of GET
// /v1/limits, and the answer to GET /v1/limits/{key}.
type LimitInfo struct {
	Limit
	Keys []readpast.KeyState `json:"keys"`
}

// LimitsResponse is the body of GET /v1/limits: every declared limit, by
// key.
type LimitsResponse struct {
	Limits []LimitInfo `json:"limits"`
}

// PutLimitRequest is the body of PUT /v1/limits/{key}. A field left out
// is 0: no bound for concurrency, no rate for rate; per_seconds defaults
// to 1, burst to the rate and weight to 1.
type PutLimitRequest struct {
	Concurrency *int     `json:"concurrency,omitempty"`
	Rate        *int     `json:"rate,omitempty"`
	PerSeconds  *float64 `json:"per_seconds,omitempty"`
	Burst       *int     `json:"burst,omitempty"`
	Weight      *int     `json:"weight,omitempty"`
}

// TakeTokensRequest is the body of POST /v1/limits/{key}/tokens; an
// empty body or {} takes one token.
type TakeTokensRequest struct {
	N *int `json:"n,omitempty"`
}

// TokenGrant is the answer to POST /v1/limits/{key}/tokens: whether the
// tokens were taken and, when they were not, the earliest time they
// could be (null when granted).
type TokenGrant struct {
	Granted bool       `json:"granted"`
	RetryAt *time.Time `json:"retry_at"`
}

// NewLimit converts a limit to its wire form, with a weight of 0 as the
// 1 it means.
func NewLimit(l readpast.Limit) Limit {
	out := Limit{Key: l.Key, Concurrency: l.Concurrency, Weight: max(l.Weight, 1)}
	if l.Rate > 0 {
		out.Rate, out.PerSeconds, out.Burst = l.Rate, l.Per.Seconds(), l.Burst
	}
	return out
}

// NewLimitInfo converts a limit and its keys' states to their wire form,
// with times in UTC and keys never null.
func NewLimitInfo(li readpast.LimitInfo) LimitInfo {
	out := LimitInfo{Limit: NewLimit(li.Limit), Keys: make([]readpast.KeyState, 0, len(li.Keys))}
	for _, k := range li.Keys {
		if !k.NextStart.IsZero() {
			k.NextStart = k.NextStart.UTC()
		}
		out.Keys = append(out.Keys, k)
	}
	return out
}

// NewLimitsResponse converts every declared limit to GET /v1/limits's
// body.
func NewLimitsResponse(ls []readpast.LimitInfo) LimitsResponse {
	out := LimitsResponse{Limits: make([]LimitInfo, 0, len(ls))}
	for _, li := range ls {
		out.Limits = append(out.Limits, NewLimitInfo(li))
	}
	return out
}

// NewTokenGrant converts TakeTokens' answer to its wire form.
func NewTokenGrant(g readpast.TokenGrant) TokenGrant {
	out := TokenGrant{Granted: g.Granted}
	if !g.Granted && !g.RetryAt.IsZero() {
		at := g.RetryAt.UTC()
		out.RetryAt = &at
	}
	return out
}

// decodePutLimit decodes the body of PUT /v1/limits/{key} into the limit
// of key, normalized (defaults filled in).
func decodePutLimit(key string, body []byte) (readpast.Limit, *apiError) {
	var req PutLimitRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return readpast.Limit{}, ae
	}
	l := readpast.Limit{Key: key}
	if req.Concurrency != nil {
		l.Concurrency = *req.Concurrency
	}
	if req.Rate != nil {
		l.Rate = *req.Rate
	}
	if req.Burst != nil {
		l.Burst = *req.Burst
	}
	if req.Weight != nil {
		l.Weight = *req.Weight
	}
	per, ae := parseSeconds("per_seconds", req.PerSeconds, 0, 0, readpast.MaxPer)
	// A positive per_seconds below 1µs (which may round to a duration of
	// 0, the default) is out of range, not 1 s.
	if ae == nil && req.PerSeconds != nil && *req.PerSeconds > 0 && per < readpast.MinRateInterval {
		ae = fieldError("per_seconds", "must be 0 (for 1) or between %g and %g", readpast.MinRateInterval.Seconds(), readpast.MaxPer.Seconds())
	}
	if ae != nil {
		return l, ae
	}
	l.Per = per
	out, err := l.Normalize()
	if err != nil {
		return l, limitFieldError(err)
	}
	return out, nil
}

// limitFieldError turns an error of Limit.Normalize or CheckLimitKey into
// a 400 naming the field as the API does: per_seconds for per, and the
// key as the one in the path.
func limitFieldError(err error) *apiError {
	var fe *readpast.FieldError
	if !errors.As(err, &fe) {
		return fieldError("", "%v", err)
	}
	ae := fromFieldError(fe, func(f string) string {
		if f == "per" {
			return "per_seconds"
		}
		return f
	})
	if ae.Field == "key" {
		ae.Message = "the key in the path " + ae.Message
	}
	return ae
}

// ParsePutLimit decodes and validates the body of PUT /v1/limits/{key}
// as the server does, and returns the limit it declares, normalized; the
// error names the field.
func ParsePutLimit(key string, body []byte) (readpast.Limit, error) {
	l, ae := decodePutLimit(key, body)
	if ae != nil {
		return l, ae
	}
	return l, nil
}

// decodeTakeTokens decodes the body of POST /v1/limits/{key}/tokens and
// returns n.
func decodeTakeTokens(body []byte) (int, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return 1, nil
	}
	var req TakeTokensRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return 0, ae
	}
	if req.N == nil {
		return 1, nil
	}
	if *req.N < 1 || *req.N > readpast.MaxTakeTokens {
		return 0, fieldError("n", "must be between 1 and %d", readpast.MaxTakeTokens)
	}
	return *req.N, nil
}

// limitKey is the {key} path value of a limit (a key or a template).
func limitKey(r *http.Request) (string, *apiError) {
	key := r.PathValue("key")
	if err := readpast.CheckLimitKey(key); err != nil {
		return "", limitFieldError(err)
	}
	return key, nil
}

func (s *server) listLimits(w http.ResponseWriter, r *http.Request) {
	ls, err := s.store.ListLimits(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, NewLimitsResponse(ls))
}

func (s *server) getLimit(w http.ResponseWriter, r *http.Request) {
	key, ae := limitKey(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	li, err := s.store.GetLimit(r.Context(), key)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, NewLimitInfo(*li))
}

// putLimit serves PUT /v1/limits/{key}: 201 with the limit when it
// created it, 200 when it replaced one.
func (s *server) putLimit(w http.ResponseWriter, r *http.Request) {
	key, ae := limitKey(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	l, ae := decodePutLimit(key, body)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	created, err := s.store.PutLimit(ctx, l)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, createdStatus(created), NewLimit(l))
}

func (s *server) deleteLimit(w http.ResponseWriter, r *http.Request) {
	deleteBy(s, w, r, limitKey, s.store.DeleteLimit)
}

// takeTokens serves POST /v1/limits/{key}/tokens. A refusal is a 200
// with granted false, retry_at and a Retry-After header (whole seconds,
// at least 1).
func (s *server) takeTokens(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := readpast.CheckKey(key); err != nil {
		s.writeError(w, r, limitFieldError(err))
		return
	}
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	n, ae := decodeTakeTokens(body)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	g, err := s.store.TakeTokens(ctx, key, n)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := NewTokenGrant(g)
	if out.RetryAt != nil {
		secs := math.Ceil(out.RetryAt.Sub(s.now()).Seconds())
		w.Header().Set("Retry-After", strconv.FormatFloat(max(secs, 1), 'f', 0, 64))
	}
	s.writeJSON(w, r, http.StatusOK, out)
}
