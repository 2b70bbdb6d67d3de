// Package dashboard serves readpast's web dashboard: an overview of the
// queues (counts, throughput and latency over the last hour, busiest
// groups, refreshed live), a job list with filters and text search, each
// job's page with its parents and children (and a batch's members by
// state), a drawing of each flow, the periodic schedules, and the actions
// an operator takes (retry, cancel, run now, seal a batch, pause and
// resume a queue or a schedule).
//
// Pages are rendered on the server with html/template; the few lines of
// JavaScript that refresh the overview, the stylesheet and the icon are
// embedded in the binary, and the Content-Security-Policy lets the pages
// load nothing from anywhere else. Authentication uses the API's tokens
// (httpapi.Guard): a login page keeps the token in a Secure, HttpOnly,
// SameSite=Strict cookie, and a read-only token sees every page but no
// action, which the server refuses too. Every change is a POST checked
// against cross-site request forgery twice: by http.CrossOriginProtection
// and by a token in the form. See docs/dashboard.md.
package dashboard

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// Defaults of Config.
const (
	// DefaultRefreshInterval is Config.RefreshInterval's default.
	DefaultRefreshInterval = 5 * time.Second
	// DefaultLoginMaxAge is Config.LoginMaxAge's default.
	DefaultLoginMaxAge = 12 * time.Hour
)

// Config configures the handler New returns.
type Config struct {
	// Store holds the jobs. Required; it must implement
	// readpast.Inspector, as both stores do.
	Store readpast.Store
	// Logger receives errors; nil discards them. Tokens are never logged.
	Logger *slog.Logger
	// Tokens, ReadTokens and AllowedHosts are the API's (httpapi.Config):
	// a full token may do everything, a read-only one only look. When both
	// token lists are empty, authentication is off: there is no login,
	// and only requests naming localhost, a loopback address or an
	// allowed host in their Host header are answered.
	Tokens       []string
	ReadTokens   []string
	AllowedHosts []string
	// Throttle limits, per client address, the failed logins and login
	// cookies: past its burst, the login page says how long to wait
	// (429) and no token is checked. Give it the API's (httpapi.Config)
	// so that both count together; its trusted proxies also decide whose
	// X-Forwarded-Proto is believed. nil means a throttle of the
	// dashboard's own, with the httpapi.ThrottleConfig defaults.
	Throttle *httpapi.Throttle
	// RefreshInterval is the shortest time between two refreshes of the
	// overview's figures, which are shared by everyone looking; a refresh
	// that took d waits at least 10 d before the next. 0 means
	// DefaultRefreshInterval.
	RefreshInterval time.Duration
	// LoginMaxAge is how long a login lasts; 0 means DefaultLoginMaxAge.
	LoginMaxAge time.Duration
}

// Handler serves the dashboard. Close it when done: it ends the overview's
// background refreshes.
type Handler struct {
	store readpast.Store
	insp  readpast.Inspector
	// flows reads edges for the job and flow pages; nil when the store
	// keeps no flows.
	flows readpast.FlowInspector
	// batches reads and seals batches for a finishing job's page; nil
	// when the store keeps no batches.
	batches  readpast.BatchStore
	guard    *httpapi.Guard
	throttle *httpapi.Throttle
	log      *slog.Logger
	pages    *pages
	static   *assets
	mux      *http.ServeMux
	overview *sampler
	// csrfKey signs the anti-forgery token of forms while authentication
	// is off; with auth on, the login token does.
	csrfKey  []byte
	loginAge time.Duration
	now      func() time.Time
}

// New returns the dashboard for cfg. It fails when cfg has no store, the
// store is not a readpast.Inspector, or a token or host is malformed.
func New(cfg Config) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("dashboard: Config.Store is required")
	}
	insp, ok := cfg.Store.(readpast.Inspector)
	if !ok {
		return nil, fmt.Errorf("dashboard: the store (%T) does not implement readpast.Inspector", cfg.Store)
	}
	if cfg.RefreshInterval < 0 || cfg.LoginMaxAge < 0 {
		return nil, errors.New("dashboard: Config durations must not be negative")
	}
	guard, err := httpapi.NewGuard(cfg.Tokens, cfg.ReadTokens, cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	throttle := cfg.Throttle
	if throttle == nil {
		if throttle, err = httpapi.NewThrottle(httpapi.ThrottleConfig{Logger: log}); err != nil {
			return nil, err
		}
	}
	static, err := loadAssets()
	if err != nil {
		return nil, err
	}
	pg, err := parsePages(static)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		store:    cfg.Store,
		insp:     insp,
		guard:    guard,
		throttle: throttle,
		log:      log,
		pages:    pg,
		static:   static,
		mux:      http.NewServeMux(),
		csrfKey:  make([]byte, 32),
		loginAge: cmp.Or(cfg.LoginMaxAge, DefaultLoginMaxAge),
		now:      time.Now,
	}
	h.flows, _ = cfg.Store.(readpast.FlowInspector)
	h.batches, _ = cfg.Store.(readpast.BatchStore)
	_, _ = rand.Read(h.csrfKey) // never fails (crypto/rand)
	h.overview = newSampler(insp, log, cmp.Or(cfg.RefreshInterval, DefaultRefreshInterval))
	h.routes()
	h.overview.warmUp()
	return h, nil
}

// Close stops the overview's background refresh, waiting for one in
// flight to end. The handler answers no request after it.
func (h *Handler) Close() error {
	h.overview.close()
	return nil
}

// routes registers every page and action. Each handler gets the viewer
// the request was authenticated as; actions are POSTs that need full
// access and a valid form token (see ServeHTTP).
func (h *Handler) routes() {
	page := func(pattern string, fn func(http.ResponseWriter, *http.Request, *viewer)) {
		h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { fn(w, r, viewerOf(r)) })
	}
	page("GET /{$}", h.overviewPage)
	page("GET /overview/live", h.overviewLive)
	page("GET /jobs", h.jobsPage)
	page("GET /jobs/{id}", h.jobPage)
	page("GET /jobs/{id}/flow", h.flowPage)
	page("POST /jobs/{id}/{action}", h.jobAction)
	page("GET /bulk/{action}", h.bulkPage)
	page("POST /bulk/{action}", h.bulkDo)
	page("POST /queues/{name}/{action}", h.queueAction)
	page("GET /queues/{name}", h.queuePage)
	page("GET /queues/{name}/live", h.queueLive)
	page("GET /retries", h.retriesPage)
	page("POST /retries/{action}", h.retriesDo)
	page("GET /schedules", h.schedulesPage)
	page("POST /schedules/{name}/{action}", h.scheduleAction)
	page("GET /limits", h.limitsPage)
	page("POST /limits", h.limitSet)
	page("POST /limits/delete", h.limitDelete)
	page("POST /logout", h.logout)
	h.mux.HandleFunc("GET /login", h.loginPage)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("GET /login/check", h.loginCheck)
	h.mux.Handle("GET /static/{file}", h.static)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.errorPage(w, r, viewerOf(r), http.StatusNotFound, "There is no such page.")
	})
}

// ServeHTTP sets the security headers, turns away requests a web page on
// another origin may have made (httpapi.Guard.CheckRequest), then lets the
// login page and the static files through and authenticates the rest: a
// page needs a valid login (or auth off), and an action (a POST) needs
// full access and the form's anti-forgery token. Logging out is the one
// POST a read-only login may make; it too needs the form's token.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	v := h.authenticate(r)
	r = withViewer(r, v)
	if err := h.guard.CheckRequest(r); err != nil {
		msg := "This request came from another site, and was refused."
		if errors.Is(err, httpapi.ErrHostNotAllowed) {
			msg = "With authentication off, the dashboard answers only for localhost, a loopback address or an allowed host (--allowed-host)."
		}
		h.errorPage(w, r, v, http.StatusForbidden, msg)
		return
	}
	_, pattern := h.mux.Handler(r)
	switch pattern {
	case "GET /static/{file}", "GET /login", "POST /login", "GET /login/check":
		h.mux.ServeHTTP(w, r)
		return
	}
	if v.access == httpapi.NoAccess {
		h.needLogin(w, r, v)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if v.access != httpapi.FullAccess && pattern != "POST /logout" {
			h.errorPage(w, r, v, http.StatusForbidden, "This token may only look: it cannot change anything.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			h.errorPage(w, r, v, http.StatusBadRequest, "The form could not be read.")
			return
		}
		if !v.validCSRF(r.PostForm.Get(csrfField)) {
			h.errorPage(w, r, v, http.StatusForbidden,
				"The form's anti-forgery token is missing or out of date. Go back, reload the page and try again.")
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy lets pages load their own script, stylesheet and
// icon, fetch from their own origin and post forms to it, and nothing
// else: no inline script or style, no frame, nothing from another site.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// maxFormBytes bounds an action's form body.
const maxFormBytes = 64 << 10

// storeContext bounds a store write made for an action; it runs to its
// end even if the browser goes away, as the API's writes do.
func storeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
}
