package storekit

import (
	"strings"
	"testing"
)

func TestCanonToken(t *testing.T) {
	const tok = "7f1c7a52-4b8e-4f5e-9a51-2f0d3c8a9b10"
	for in, want := range map[string]string{
		tok:                                    tok,
		strings.ToUpper(tok):                   tok,
		"{" + tok + "}":                        tok,
		"urn:uuid:" + tok:                      tok,
		strings.ReplaceAll(tok, "-", ""):       tok,
		"":                                     "",
		"not-a-token":                          "not-a-token",
		"7f1c7a52-4b8e-4f5e-9a51-2f0d3c8a9b1G": "7f1c7a52-4b8e-4f5e-9a51-2f0d3c8a9b1G",
	} {
		if got := CanonToken(in); got != want {
			t.Errorf("CanonToken(%q) = %q, want %q", in, got, want)
		}
	}
}
