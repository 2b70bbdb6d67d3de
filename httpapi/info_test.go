package httpapi

import (
	"strings"
	"testing"

	"github.com/readpast/readpast/internal/buildinfo"
)

// TestInfoAndBuildMetric: GET /v1 and the readpast_build_info metric
// report the build's version (buildinfo), the same one.
func TestInfoAndBuildMetric(t *testing.T) {
	old := buildinfo.Version
	buildinfo.Version = "v0.0.0-test"
	defer func() { buildinfo.Version = old }()
	e := newEnv(t, nil)
	var info Info
	e.must("GET", "/v1", ``, 200, &info)
	if info.Name != "readpast" || info.Version != "v0.0.0-test" || info.GoVersion == "" {
		t.Fatalf("GET /v1 = %+v", info)
	}
	metrics := string(e.must("GET", "/metrics", ``, 200, nil))
	if !strings.Contains(metrics, `readpast_build_info{go_version="`+info.GoVersion+`",revision="`+info.Revision+`",version="v0.0.0-test"} 1`) {
		t.Fatalf("metrics lack readpast_build_info of version v0.0.0-test:\n%s", grepLines(metrics, "build_info"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
