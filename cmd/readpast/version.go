package main

import (
	"context"
	"fmt"
	"io"

	"github.com/readpast/readpast/internal/buildinfo"
)

// runVersion prints the version of this binary (internal/buildinfo: set
// with -ldflags, or the module version of go install, or "devel") and the
// git revision it was built from, when the go command stamped one.
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
	info := buildinfo.Get()
	if *asJSON {
		return writeJSON(stdout, info)
	}
	fmt.Fprintf(stdout, "readpast %s (%s", info.Version, info.GoVersion)
	switch {
	case info.Revision != "":
		fmt.Fprintf(stdout, ", revision %s", info.Short())
		if info.Time != "" {
			fmt.Fprintf(stdout, " of %s", info.Time)
		}
	case info.Version == "devel":
		// go build stamps the revision inside a git checkout unless told
		// not to (-buildvcs=false, often set in GOFLAGS).
		fmt.Fprint(stdout, ", no revision: built outside a git checkout or with -buildvcs=false")
	}
	fmt.Fprintln(stdout, ")")
	return nil
}
