package conformance_test

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// match compares a step's outcome (got, decoded JSON) with its expectation
// (want, decoded JSON, variables resolved) and returns what differs, one
// line each, empty when it matches. now is when the outcome arrived, for
// the $future matcher.
//
// An object expectation matches an object holding at least its keys (a
// key missing from got counts as null); an array expectation matches an
// array of the same length, element by element; any other value matches an
// equal value (numbers by value). An object with a single key starting
// with "$" is a matcher; see README.md.
func match(want, got any, now time.Time) []string {
	var m matcher
	m.now = now
	m.walk("", want, got)
	return m.diffs
}

type matcher struct {
	now   time.Time
	diffs []string
}

func (m *matcher) fail(path, format string, args ...any) {
	if path == "" {
		path = "(value)"
	}
	m.diffs = append(m.diffs, path+": "+fmt.Sprintf(format, args...))
}

func (m *matcher) walk(path string, want, got any) {
	switch w := want.(type) {
	case map[string]any:
		if op, arg, ok := matcherOf(w); ok {
			m.op(path, op, arg, got)
			return
		}
		g, ok := got.(map[string]any)
		if !ok {
			m.fail(path, "want an object, got %s", show(got))
			return
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m.walk(join(path, k), w[k], g[k])
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			m.fail(path, "want an array of %d, got %s", len(w), show(got))
			return
		}
		if len(g) != len(w) {
			m.fail(path, "want %d elements, got %d: %s", len(w), len(g), show(got))
			return
		}
		for i := range w {
			m.walk(join(path, strconv.Itoa(i)), w[i], g[i])
		}
	default:
		if !equal(want, got) {
			m.fail(path, "want %s, got %s", show(want), show(got))
		}
	}
}

// matcherOf reports whether w is a matcher: one key, starting with "$".
func matcherOf(w map[string]any) (op string, arg any, ok bool) {
	if len(w) != 1 {
		return "", nil, false
	}
	for k, v := range w {
		if strings.HasPrefix(k, "$") {
			return k, v, true
		}
	}
	return "", nil, false
}

func (m *matcher) op(path, op string, arg, got any) {
	switch op {
	case "$any":
	case "$present":
		if (got != nil) != truthy(arg) {
			m.fail(path, "want present=%v, got %s", truthy(arg), show(got))
		}
	case "$ne":
		if equal(arg, got) {
			m.fail(path, "want anything but %s", show(arg))
		}
	case "$oneof":
		opts, _ := arg.([]any)
		for _, o := range opts {
			if equal(o, got) {
				return
			}
		}
		m.fail(path, "want one of %s, got %s", show(arg), show(got))
	case "$gt", "$gte", "$lt", "$lte":
		a, aok := arg.(float64)
		g, gok := got.(float64)
		if !aok || !gok {
			m.fail(path, "%s %s: want numbers, got %s", op, show(arg), show(got))
			return
		}
		ok := map[string]bool{"$gt": g > a, "$gte": g >= a, "$lt": g < a, "$lte": g <= a}[op]
		if !ok {
			m.fail(path, "want %s %s, got %s", op[1:], show(arg), show(got))
		}
	case "$len":
		n, ok := arg.(float64)
		var l int
		switch g := got.(type) {
		case []any:
			l = len(g)
		case string:
			l = len(g)
		case map[string]any:
			l = len(g)
		default:
			m.fail(path, "want something of length %s, got %s", show(arg), show(got))
			return
		}
		if !ok || float64(l) != n {
			m.fail(path, "want length %s, got %d: %s", show(arg), l, show(got))
		}
	case "$contains":
		s, ok := got.(string)
		sub, _ := arg.(string)
		if !ok || !strings.Contains(s, sub) {
			m.fail(path, "want a string containing %q, got %s", sub, show(got))
		}
	case "$future":
		s, _ := got.(string)
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			m.fail(path, "want an RFC 3339 time, got %s", show(got))
			return
		}
		if at.After(m.now) != truthy(arg) {
			m.fail(path, "want future=%v (outcome received at %s), got %s", truthy(arg), m.now.UTC().Format(time.RFC3339Nano), s)
		}
	default:
		m.fail(path, "unknown matcher %s", op)
	}
}

func truthy(v any) bool { b, _ := v.(bool); return b }

// equal compares two decoded JSON values; numbers by value.
func equal(a, b any) bool {
	if x, ok := a.(float64); ok {
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	}
	return reflect.DeepEqual(a, b)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// show is v as compact JSON, cut at 300 bytes.
func show(v any) string { return showN(v, 300) }

// showN is v as compact JSON, cut at n bytes.
func showN(v any, n int) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

func TestMatch(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		want, got string
		diffs     int
	}{
		{`{"state":"running"}`, `{"state":"running","id":3}`, 0},
		{`{"state":"running"}`, `{"state":"pending"}`, 1},
		{`{"token":null}`, `{}`, 0},
		{`{"token":{"$present":true}}`, `{}`, 1},
		{`{"token":{"$present":true}}`, `{"token":"x"}`, 0},
		{`{"jobs":[{"id":1},{"id":2}]}`, `{"jobs":[{"id":1},{"id":2}]}`, 0},
		{`{"jobs":[{"id":1},{"id":2}]}`, `{"jobs":[{"id":2},{"id":1}]}`, 2},
		{`{"jobs":[{"id":1}]}`, `{"jobs":[{"id":1},{"id":2}]}`, 1},
		{`{"jobs":{"$len":2}}`, `{"jobs":[1,2]}`, 0},
		{`{"jobs":{"$len":2}}`, `{"jobs":[1]}`, 1},
		{`{"n":{"$lte":100}}`, `{"n":99.5}`, 0},
		{`{"n":{"$lte":100}}`, `{"n":100.5}`, 1},
		{`{"n":{"$gt":1}}`, `{"n":"2"}`, 1},
		{`{"t":{"$ne":"a"}}`, `{"t":"b"}`, 0},
		{`{"t":{"$ne":"a"}}`, `{"t":"a"}`, 1},
		{`{"s":{"$oneof":["a","b"]}}`, `{"s":"b"}`, 0},
		{`{"s":{"$oneof":["a","b"]}}`, `{"s":"c"}`, 1},
		{`{"m":{"$contains":"lease"}}`, `{"m":"lease expired"}`, 0},
		{`{"at":{"$future":true}}`, `{"at":"2026-01-01T12:00:01Z"}`, 0},
		{`{"at":{"$future":true}}`, `{"at":"2026-01-01T11:59:59.5Z"}`, 1},
		{`{"at":{"$future":false}}`, `{"at":"2026-01-01T11:59:59.5Z"}`, 0},
		{`{"x":{"$bogus":1}}`, `{"x":1}`, 1},
		{`{"a":{"b":1}}`, `{"a":[]}`, 1},
		{`3`, `3.0`, 0},
		{`{"r":{"slept":1}}`, `{"r":{"slept":1,"extra":true}}`, 0},
	} {
		diffs := match(decodeJSON(t, c.want), decodeJSON(t, c.got), now)
		if len(diffs) != c.diffs {
			t.Errorf("match(%s, %s) = %q, want %d differences", c.want, c.got, diffs, c.diffs)
		}
	}
}
