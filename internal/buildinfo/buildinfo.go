// Package buildinfo says which build of readpast is running: the same
// version on every surface (readpast version, the HTTP API's GET /v1, the
// dashboard's footer and the readpast_build_info metric).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the release version, set at build time with
//
//	go build -ldflags "-X github.com/readpast/readpast/internal/buildinfo.Version=v0.1.0" ./cmd/readpast
//
// Without it, the module version of the build info is used (set by go
// install module@version, or, for a build in a git checkout, the
// pseudo-version the go command derives from the commit), or "devel".
var Version = ""

// Info is what a build says of itself.
type Info struct {
	Version string `json:"version"`
	// Revision is the VCS revision it was built from, when the go command
	// stamped it (a build inside a git checkout, unless -buildvcs=false).
	Revision string `json:"revision,omitempty"`
	// Modified reports a build from a checkout with uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// Time is the revision's commit time (RFC 3339), when stamped.
	Time      string `json:"time,omitempty"`
	GoVersion string `json:"go_version"`
}

// Get returns this build's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return from(Version, runtime.Version(), bi)
}

// from builds the Info of a build whose -ldflags version is version, from
// its build info bi (nil when the binary has none).
func from(version, goVersion string, bi *debug.BuildInfo) Info {
	info := Info{Version: version, GoVersion: goVersion}
	if bi != nil {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			case "vcs.time":
				info.Time = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	return info
}

// Short is the revision as people quote it: its first 12 characters,
// with "+dirty" for a build from a modified checkout; "" when unknown.
func (i Info) Short() string {
	if i.Revision == "" {
		return ""
	}
	r := i.Revision
	if len(r) > 12 {
		r = r[:12]
	}
	if i.Modified {
		r += "+dirty"
	}
	return r
}
