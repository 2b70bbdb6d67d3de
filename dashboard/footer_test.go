package dashboard

import (
	"strings"
	"testing"

	"github.com/readpast/readpast/internal/buildinfo"
)

// TestFooterVersion: every page's footer names the build's version, the
// one readpast version, GET /v1 and readpast_build_info report.
func TestFooterVersion(t *testing.T) {
	e := newEnv(t, false)
	page := e.do(req{path: "/"})
	want := `<footer class="build">readpast ` + buildinfo.Get().Version + `</footer>`
	if !strings.Contains(page.body, want) {
		t.Fatalf("the overview lacks %s", want)
	}
}
