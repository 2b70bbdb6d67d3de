package buildinfo

import (
	"runtime/debug"
	"testing"
)

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

// TestFromBuildInfo: what the go command stamps into a build from a git
// checkout (its revision, commit time and whether the tree was modified)
// reaches Info whatever the version says, a "(devel)" main module
// included.
func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "c09c446da7f6cf126cb3019877ae7958df88497e"},
		{Key: "vcs.time", Value: "2026-11-25T16:00:48Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name, ldflags, main, want string
	}{
		{"devel module", "", "(devel)", "devel"},
		{"pseudo-version", "", "v0.0.0-20261125160048-c09c446da7f6+dirty", "v0.0.0-20261125160048-c09c446da7f6+dirty"},
		{"release ldflags", "v0.1.0", "(devel)", "v0.1.0"},
	} {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/readpast/readpast", Version: tc.main}, Settings: vcs}
		got := from(tc.ldflags, "go1.26", bi)
		if got.Version != tc.want || got.Revision != "c09c446da7f6cf126cb3019877ae7958df88497e" ||
			!got.Modified || got.Time != "2026-11-25T16:00:48Z" || got.Short() != "c09c446da7f6+dirty" {
			t.Errorf("%s: from = %+v (short %q), want version %s and the stamped revision", tc.name, got, got.Short(), tc.want)
		}
	}
	if got := from("", "go1.26", nil); got.Version != "devel" || got.Revision != "" || got.Short() != "" {
		t.Errorf("no build info: %+v", got)
	}
	clean := from("", "go1.26", &debug.BuildInfo{Settings: vcs[:2]})
	if clean.Short() != "c09c446da7f6" {
		t.Errorf("clean tree: short %q", clean.Short())
	}
}
