package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/buildinfo"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// page is what the layout needs of every page.
type page struct {
	Title string
	// Nav names the menu entry of the page, if any.
	Nav    string
	Viewer *viewer
	// Flash is a message about the action that led here.
	Flash string
	Data  any
}

// pages holds one template set per page file, each with the layout.
type pages struct {
	sets map[string]*template.Template
}

// parsePages parses every page template with the layout, the partials and
// the helper functions.
func parsePages(a *assets) (*pages, error) {
	version := buildinfo.Get().Version
	funcs := template.FuncMap{
		"version":    func() string { return version },
		"asset":      a.url,
		"count":      count,
		"duration":   duration,
		"relative":   relative,
		"timestamp":  timestamp,
		"pretty":     prettyJSON,
		"short":      short,
		"lower":      strings.ToLower,
		"states":     func() []readpast.JobState { return readpast.AllStates },
		"when":       when,
		"pathEscape": url.PathEscape,
		"queueJobs": func(queue, state string) template.URL {
			return jobsURL(filter{Queue: queue, State: state}.values())
		},
		"groupJobs":  func(group string) template.URL { return jobsURL(filter{Group: group}.values()) },
		"queueURL":   queueURL,
		"retriesURL": retriesURL,
		"tagJobs":    func(tag string) template.URL { return jobsURL(filter{Tag: tag}.values()) },
		"relatives":  newRelativesTable,
		"jobURLOf":   jobURL,
		"jobForm":    newJobForm,
		"nodeW":      func() int { return nodeW },
		"nodeH":      func() int { return nodeH },
		"edgeStates": func() []readpast.EdgeState {
			return []readpast.EdgeState{readpast.EdgeOpen, readpast.EdgeHeld, readpast.EdgeDone}
		},
		"edgePolicies": func() []readpast.EdgePolicy {
			return []readpast.EdgePolicy{readpast.CancelChild, readpast.RunAnyway, readpast.HoldChild}
		},
	}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range names {
		base := path.Base(name)
		if base == "layout.html" || strings.HasPrefix(base, "_") {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/_*.html", name)
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", base, err)
		}
		p.sets[strings.TrimSuffix(base, ".html")] = t
	}
	return p, nil
}

// render writes page name with the layout and status. The page is made in
// memory first, so that a template error is a clean 500, never half a
// page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, v *viewer, status int, name string, p page) {
	p.Viewer = v
	if p.Flash == "" {
		p.Flash = flashes[r.URL.Query().Get("done")]
	}
	if p.Flash == "" {
		p.Flash = bulkFlash(r.URL.Query())
	}
	h.write(w, r, status, name, "layout", p)
}

// renderPart writes the template part of page name alone (for the live
// refresh).
func (h *Handler) renderPart(w http.ResponseWriter, r *http.Request, name, part string, data any) {
	h.write(w, r, http.StatusOK, name, part, data)
}

func (h *Handler) write(w http.ResponseWriter, r *http.Request, status int, name, tmpl string, data any) {
	var b bytes.Buffer
	t := h.pages.sets[name]
	var err error
	if t == nil {
		err = fmt.Errorf("no page %q", name)
	} else {
		err = t.ExecuteTemplate(&b, tmpl, data)
	}
	if err != nil {
		h.log.ErrorContext(r.Context(), "dashboard: rendering a page", slog.String("page", name), slog.Any("error", err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// errorPage answers with status and a message, in the layout.
func (h *Handler) errorPage(w http.ResponseWriter, r *http.Request, v *viewer, status int, msg string) {
	h.render(w, r, v, status, "error", page{Title: http.StatusText(status), Data: msg})
}

// assets serves the embedded static files. Pages name them with a hash of
// their content (asset), so that browsers may keep them for good and
// still get a new file after an upgrade.
type assets struct {
	files   fs.FS
	version map[string]string
}

func loadAssets() (*assets, error) {
	files, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	a := &assets{files: files, version: map[string]string{}}
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		a.version[e.Name()] = hex.EncodeToString(sum[:6])
	}
	return a, nil
}

// url returns the address of a static file, with its version.
func (a *assets) url(name string) (string, error) {
	v, ok := a.version[name]
	if !ok {
		return "", fmt.Errorf("dashboard: no static file %q", name)
	}
	return "/static/" + name + "?v=" + v, nil
}

func (a *assets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	v, ok := a.version[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(a.files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		hd.Set("Content-Type", ct)
	}
	if r.URL.Query().Get("v") == v {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	_, _ = w.Write(b)
}
