package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the release version, set at build time with
// -ldflags "-X main.version=v1.2.3". Without it the module version from the
// build info is used, or "devel".
var version = ""

// versionInfo is what `version --json` prints.
type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Revision  string `json:"revision,omitempty"`
}

// runVersion prints the version of this binary.
func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version [--json]", stdout)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	info := versionInfo{Version: version, GoVersion: runtime.Version()}
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
	if *asJSON {
		return writeJSON(stdout, info)
	}
	fmt.Fprintf(stdout, "readpast %s (%s", info.Version, info.GoVersion)
	if info.Revision != "" {
		fmt.Fprintf(stdout, ", %s", info.Revision)
	}
	fmt.Fprintln(stdout, ")")
	return nil
}
