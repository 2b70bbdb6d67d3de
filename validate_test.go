package readpast

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
		// One key twice in one object: SQLite would keep both, jsonb the
		// last. The same key in different objects is fine.
		{`{"a":1,"a":2}`, `key "a" twice`},
		{`{"a":1,"\u0061":2}`, `key "a" twice`},
		{`{"x":{"a":[1,{"b":1}],"b":{"a":"a"}},"a":{"a":1},"b":[{"a":1},{"a":1}]}`, ""},
		{`{"x":{"a":[1,{"b":1}],"b":{"a":"a","b":2,"a":3}}}`, `key "a" twice`},
		{`[{"k":"v"},{"k":"v","k":"w"}]`, `key "k" twice`},
		{`{"a":"\"a\"","\"a\"":1}`, ""},
		{`{"":1,"":2}`, `key "" twice`},
		{keys(40, ""), ""},
		{keys(40, "k7"), `key "k7" twice`},
		{keys(40, "k39"), `key "k39" twice`},
		{`[` + keys(40, "") + `,` + keys(3, "") + `,` + keys(3, "k0") + `]`, `key "k0" twice`},
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

// TestNamesAreUTF8: every name of the Go API refuses bytes that are not
// UTF-8 with a FieldError naming the field (SQLite would store them, and
// PostgreSQL's text refuses them).
func TestNamesAreUTF8(t *testing.T) {
	now := time.Now()
	bad := "n\xff"
	for field, p := range map[string]EnqueueParams{
		"kind":       {Kind: bad},
		"queue":      {Kind: "k", Queue: bad},
		"group":      {Kind: "k", Group: bad},
		"tags":       {Kind: "k", Tags: []string{bad}},
		"unique_key": {Kind: "k", UniqueKey: bad},
	} {
		_, err := p.Normalize(now)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("Normalize with %s %q = %v, want a %s FieldError", field, bad, err, field)
		}
	}
	for field, f := range map[string]func() error{
		"worker": func() error { _, err := ClaimParams{Worker: bad}.Normalize(); return err },
		"queue":  func() error { _, err := ListParams{Queue: bad}.Normalize(); return err },
		"kind":   func() error { _, err := ListParams{Kind: bad}.Normalize(); return err },
		"key":    func() error { _, err := Limit{Key: bad + "*"}.Normalize(); return err },
	} {
		var fe *FieldError
		if err := f(); !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s %q: %v, want a %s FieldError", field, bad, err, field)
		}
	}
}

// keys is a JSON object with the keys k0 to k(n-1), and then dup again
// unless it is empty.
func keys(n int, dup string) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	if dup != "" {
		fmt.Fprintf(&b, `%q:0,`, dup)
	}
	return strings.TrimSuffix(b.String(), ",") + "}"
}

// BenchmarkCheckJSON measures the check every payload and result gets,
// on a typical payload of about 1 KB.
func BenchmarkCheckJSON(b *testing.B) {
	payload := []byte(`{"order":{"id":"ord_8f2c","customer":{"id":42,"email":"a@example.com","name":"Ada"},` +
		`"lines":[{"sku":"A-1","qty":2,"price":12.5},{"sku":"B-7","qty":1,"price":99.99},{"sku":"C-3","qty":10,"price":0.5}],` +
		`"total":129.99,"currency":"EUR","paid":true,"notes":null},"meta":{"source":"web","attempt":1,"tags":["x","y","z"],` +
		`"headers":{"user-agent":"Mozilla/5.0 (X11; Linux x86_64)","accept":"application/json","x-request-id":"5b0e9c1d-3f2a-4c8e-9d7b-1a2b3c4d5e6f"}},` +
		`"text":"` + strings.Repeat("lorem ipsum dolor sit amet ", 16) + `"}`)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := checkJSON("payload", payload); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTagsCountOnce: a tag given twice is kept once and counts once
// against MaxTags; more distinct tags than that are refused.
func TestTagsCountOnce(t *testing.T) {
	now := time.Now()
	same := make([]string, MaxTags+5)
	for i := range same {
		same[i] = "t"
	}
	p, err := EnqueueParams{Kind: "k", Tags: append(same, "u")}.Normalize(now)
	if err != nil || !slices.Equal(p.Tags, []string{"t", "u"}) {
		t.Fatalf("%d repeats of one tag and another: %v %v", len(same), p.Tags, err)
	}
	distinct := make([]string, MaxTags+1)
	for i := range distinct {
		distinct[i] = fmt.Sprintf("t%d", i)
	}
	if _, err := (EnqueueParams{Kind: "k", Tags: distinct[:MaxTags]}).Normalize(now); err != nil {
		t.Fatalf("%d distinct tags: %v", MaxTags, err)
	}
	var fe *FieldError
	if _, err := (EnqueueParams{Kind: "k", Tags: distinct}).Normalize(now); !errors.As(err, &fe) || fe.Field != "tags" {
		t.Fatalf("%d distinct tags: %v, want a tags FieldError", MaxTags+1, err)
	}
}

// TestLimitPerIsWholeMicroseconds: a Per that is not a whole number of
// microseconds (the stores' unit) is rounded up, so the limit read back
// is the one enforced, never faster than declared.
func TestLimitPerIsWholeMicroseconds(t *testing.T) {
	for _, tc := range []struct{ per, want time.Duration }{
		{1500 * time.Nanosecond, 2 * time.Microsecond},
		{time.Second + time.Nanosecond, time.Second + time.Microsecond},
		{3 * time.Microsecond, 3 * time.Microsecond},
	} {
		l, err := Limit{Key: "a", Rate: 1, Per: tc.per}.Normalize()
		if err != nil || l.Per != tc.want {
			t.Errorf("Per %v: %v %v, want %v", tc.per, l.Per, err, tc.want)
		}
	}
}
