package pgtest

import "testing"

// TestWithParams: settings are added to a URL with or without a query
// string, replace those of the same name, and are quoted in keyword/value
// strings.
func TestWithParams(t *testing.T) {
	for _, c := range []struct{ cs, params, want string }{
		{"postgres://u@h:5/db", "&a=1&b=x%20y", "postgres://u@h:5/db?a=1&b=x%20y"},
		{"postgres://u@h:5/db?sslmode=disable", "a=1", "postgres://u@h:5/db?a=1&sslmode=disable"},
		{"postgresql://u@h/db?a=0", "a=1", "postgresql://u@h/db?a=1"},
		{"postgres://u@h/db", "", "postgres://u@h/db"},
		{"postgres://u@h/db", "a=x%2By", "postgres://u@h/db?a=x%2By"},
		{"host=h dbname=db", "a=1&b=it's%20a\\b", `host=h dbname=db a='1' b='it\'s a\\b'`},
	} {
		got, err := WithParams(c.cs, c.params)
		if err != nil {
			t.Fatalf("%q + %q: %v", c.cs, c.params, err)
		}
		if got != c.want {
			t.Errorf("%q + %q = %q, want %q", c.cs, c.params, got, c.want)
		}
	}
	if _, err := WithParams("postgres://h/db", "a=%zz"); err == nil {
		t.Error("a malformed parameter was accepted")
	}
}
