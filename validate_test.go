package readpast

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCheckResult(t *testing.T) {
	escapedBackslash, _ := json.Marshal("path\\u0000x") // a backslash, then text
	realNUL, _ := json.Marshal("a\x00b")
	for _, tc := range []struct {
		in   string
		want bool // accepted
	}{
		{``, true},
		{`{"a":1}`, true},
		{string(escapedBackslash), true},
		{`"\\\\\u0000"`, false}, // two escaped backslashes, then a NUL escape
		{`"\\\\u0000"`, true},   // two escaped backslashes, then text
		{string(realNUL), false},
		{`{"k":"\u0000"}`, false},
		{`{not json`, false},
	} {
		err := CheckResult(json.RawMessage(tc.in))
		if (err == nil) != tc.want {
			t.Errorf("CheckResult(%s) = %v, want accepted=%v", tc.in, err, tc.want)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckResult(%s): %v is not ErrInvalid", tc.in, err)
		}
	}
}

func TestFailureNormalize(t *testing.T) {
	f := Failure{Message: "a\x00b\xffc", Stack: string(make([]byte, MaxErrorStack+10))}.Normalize()
	if f.Message != "ab\uFFFDc" {
		t.Fatalf("message %q", f.Message)
	}
	if len(f.Stack) > MaxErrorStack+len("…") {
		t.Fatalf("stack not cut: %d bytes", len(f.Stack))
	}
}

// TestCheckJSON covers what PostgreSQL's jsonb cannot hold (checked
// against PostgreSQL 15 by hand, and by httpapi's TestBadPayloadsPostgres
// through the store) and what every store must keep as it is.
func TestCheckJSON(t *testing.T) {
	many := func(n int, v string) string { return "[" + strings.TrimSuffix(strings.Repeat(v+",", n), ",") + "]" }
	for _, tc := range []struct {
		in   string
		want string // "" when accepted, else part of the message
	}{
		{`{"s":"\u0001\n\"\\ é 😀 \ud83d\ude00 \uDBFF\uDFFF"}`, ""},
		{`{"s":"\u0000"}`, `\u0000`},
		{`{"\u0000":1}`, `\u0000`},
		{`"\\u0000"`, ""},
		{`"\ud800"`, `surrogate escape \ud800`},
		{`"\uD800x"`, `surrogate escape \ud800`},
		{`"\ud800\n"`, `surrogate escape \ud800`},
		{`"\ud800\u0041"`, `surrogate escape \ud800`},
		{`"\ud800\ud800"`, `surrogate escape \ud800`},
		{`"\udc00"`, `surrogate escape \udc00`},
		{`["ok","\udfff"]`, `surrogate escape \udfff`},
		{"\"a\xffb\"", "UTF-8 (byte 2)"},
		{"{\"a\":\"\xc3\"}", "UTF-8 (byte 6)"},
		{"\"\xed\xa0\x80\"", "UTF-8"}, // a surrogate encoded in UTF-8
		{`[0, -0, 1.50, -12.5e-3, 1E+5, 123456789012345678901234567890]`, ""},
		{`1e131071`, ""},
		{`9.9e131071`, ""},
		{`-0.0001e131075`, ""},
		{`1e131072`, "out of the range"},
		{`10e131071`, "out of the range"},
		{`1e-16383`, ""},
		{`1.5e-16382`, ""},
		{`1e-16384`, "out of the range"},
		{`1.5e-16383`, "out of the range"},
		{`0e1000000`, ""},
		{`0e-20000`, "out of the range"},
		{`0.0e-16383`, "out of the range"},
		{`1e99999999999999999999999`, "out of the range"},
		{`1e-99999999999999999999999`, "out of the range"},
		{many(7, "1e131071"), ""},
		{many(9, "1e131071"), "send them as strings"},
		{many(70, "1e-16000"), "send them as strings"},
		{`{not json`, "not valid JSON"},
	} {
		err := checkJSON("payload", []byte(tc.in))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkJSON(%.60s) = %v, want accepted", tc.in, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("checkJSON(%.60s) = %v, want an error with %q", tc.in, err, tc.want)
		case err != nil:
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "payload" {
				t.Errorf("checkJSON(%.60s) = %#v, want a FieldError for payload", tc.in, err)
			}
		}
	}
}

// TestNormalizeChecksPayload: Go callers get the same validation as the
// HTTP API, naming the payload.
func TestNormalizeChecksPayload(t *testing.T) {
	now := time.Now()
	for _, p := range []string{`{"s":"\u0000"}`, `"\ud800"`, "\"\xff\"", `1e131072`} {
		_, err := EnqueueParams{Kind: "k", Payload: json.RawMessage(p)}.Normalize(now)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "payload" {
			t.Errorf("Normalize with payload %q = %v, want a payload FieldError", p, err)
		}
	}
	if _, err := (EnqueueParams{Kind: "k", Payload: json.RawMessage(`{"ok":"\ud83d\ude00"}`)}).Normalize(now); err != nil {
		t.Errorf("Normalize of a good payload: %v", err)
	}
	if err := CheckResult(json.RawMessage(`"\udc00"`)); err == nil || !strings.Contains(err.Error(), "result") {
		t.Errorf("CheckResult of a lone surrogate = %v", err)
	}
}

// TestNormalizeChecksTheUTCYear: a run-at's year is checked in UTC, the
// zone the stores keep it in, whatever zone the caller wrote it in.
func TestNormalizeChecksTheUTCYear(t *testing.T) {
	now := time.Now()
	east, west := time.FixedZone("east", 3600), time.FixedZone("west", -5*3600)
	for _, at := range []time.Time{
		time.Date(9999, 12, 31, 23, 59, 59, 0, west), // 10000-01-01 in UTC
		time.Date(1970, 1, 1, 0, 0, 0, 0, east),      // 1969-12-31 in UTC
	} {
		_, err := EnqueueParams{Kind: "k", RunAt: at}.Normalize(now)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "run_at" {
			t.Errorf("Normalize with run-at %v = %v, want a run_at FieldError", at, err)
		}
	}
	if _, err := (EnqueueParams{Kind: "k", RunAt: time.Date(9999, 12, 31, 23, 59, 59, 0, east)}).Normalize(now); err != nil {
		t.Errorf("Normalize of a run-at in 9999 in UTC: %v", err)
	}
}
