package httpapi

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGuideFollowsOpenAPI keeps docs/http-api.md from drifting from the
// OpenAPI document, which is the reference: every documented operation
// has a section in the guide (and the guide names no operation the
// document lacks), and the guide's table of the job object lists exactly
// the fields of the Job and ClaimedJob schemas.
func TestGuideFollowsOpenAPI(t *testing.T) {
	guide, err := os.ReadFile("../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
				AllOf      []struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"allOf"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}

	// Operations named in the guide's headings: "### `GET /v1/x`, `POST /v1/y`";
	// after one, "`/v1/z`" is another path with the same method and
	// "`/resume`" the same path with its last part replaced.
	heading := regexp.MustCompile("(?m)^#{3,4} (.*)$")
	op := regexp.MustCompile("`(GET|POST|PUT|DELETE|PATCH) (/[^`]*)`|`(/[^` ]+)`")
	inGuide := map[string]bool{}
	for _, h := range heading.FindAllStringSubmatch(string(guide), -1) {
		var method, last string
		for _, m := range op.FindAllStringSubmatch(h[1], -1) {
			switch {
			case m[1] != "":
				method, last = m[1], m[2]
				inGuide[method+" "+m[2]] = true
			case method != "" && strings.HasPrefix(m[3], "/v1/"):
				inGuide[method+" "+m[3]] = true
			case method != "" && strings.Count(last, "/") > 2:
				// `/resume` after `POST /v1/schedules/{name}/pause`.
				inGuide[method+" "+last[:strings.LastIndex(last, "/")]+m[3]] = true
			}
		}
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(documented)
	for _, o := range documented {
		if !inGuide[o] {
			t.Errorf("%s is in openapi.json but has no section in docs/http-api.md", o)
		}
	}
	for o := range inGuide {
		if !slices.Contains(documented, o) {
			t.Errorf("docs/http-api.md has a section for %s, which openapi.json does not describe", o)
		}
	}

	// The job object's table.
	start := strings.Index(string(guide), "## The job object")
	if start < 0 {
		t.Fatal(`docs/http-api.md has no "## The job object" section`)
	}
	section := string(guide[start:])
	section = section[:strings.Index(section, "\n\n```")]
	field := regexp.MustCompile("(?m)^\\| (`[a-z_]+`(?:, `[a-z_]+`)*) \\|")
	var inTable []string
	for _, m := range field.FindAllStringSubmatch(section, -1) {
		for f := range strings.SplitSeq(m[1], ", ") {
			inTable = append(inTable, strings.Trim(f, "`"))
		}
	}
	slices.Sort(inTable)
	var inSchema []string
	for f := range doc.Components.Schemas["Job"].Properties {
		inSchema = append(inSchema, f)
	}
	for _, part := range doc.Components.Schemas["ClaimedJob"].AllOf { // the token
		for f := range part.Properties {
			if !slices.Contains(inSchema, f) {
				inSchema = append(inSchema, f)
			}
		}
	}
	slices.Sort(inSchema)
	if !slices.Equal(inTable, inSchema) {
		t.Errorf("the job table of docs/http-api.md lists %v; the Job schema has %v", inTable, inSchema)
	}
}
