package readpast

import (
	"encoding/json"
	"errors"
	"testing"
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
