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
// install module@version), or "devel".
var Version = ""

// Info is what a build says of itself.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"` // the VCS revision it was built from, when known
	GoVersion string `json:"go_version"`
}

// Get returns this build's Info.
func Get() Info {
	info := Info{Version: Version, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				info.Revision = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	return info
}
