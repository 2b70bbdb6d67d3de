package buildinfo

import "testing"

// TestGet: the version set at build time wins; without it a test binary
// (whose main module has no version) says "devel"; the Go version is
// always there.
func TestGet(t *testing.T) {
	if got := Get(); got.Version != "devel" || got.GoVersion == "" {
		t.Fatalf("Get() = %+v, want version devel and a Go version", got)
	}
	old := Version
	defer func() { Version = old }()
	Version = "v9.8.7"
	if got := Get().Version; got != "v9.8.7" {
		t.Fatalf("with Version set, Get().Version = %q", got)
	}
}
