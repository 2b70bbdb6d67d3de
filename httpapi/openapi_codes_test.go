package httpapi

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPIListsEveryErrorCode: the Error schema's code enum holds
// exactly the Code constants of errors.go, so a client generated from the
// document knows every code the server sends (snooze_limit was missing).
func TestOpenAPIListsEveryErrorCode(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			for i, name := range v.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(v.Values) {
					continue
				}
				if lit, ok := v.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					codes = append(codes, s)
				}
			}
		}
	}
	if len(codes) < 10 {
		t.Fatalf("found only %d Code constants in errors.go: %v", len(codes), codes)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Error struct {
							Properties struct {
								Code struct {
									Enum []string `json:"enum"`
								} `json:"code"`
							} `json:"properties"`
						} `json:"error"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas.Error.Properties.Error.Properties.Code.Enum
	slices.Sort(codes)
	slices.Sort(enum)
	if !slices.Equal(codes, enum) {
		t.Errorf("openapi.json's error codes %v, errors.go's %v", enum, codes)
	}
}
