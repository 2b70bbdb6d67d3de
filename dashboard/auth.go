package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/readpast/readpast/httpapi"
)

// cookieName is the login cookie's name. The __Host- prefix makes the
// browser refuse it unless it is Secure, for the path /, and without a
// Domain, so that no other host or path can set or shadow it.
const cookieName = "__Host-readpast"

// csrfField is the name of the anti-forgery token in every form.
const csrfField = "csrf"

// viewer is who a request was authenticated as.
type viewer struct {
	// authOn: the dashboard has tokens (and a login page).
	authOn bool
	access httpapi.Access
	// csrf is the anti-forgery token of this viewer's forms.
	csrf string
	// badCookie: the login cookie holds a token that is not valid.
	badCookie bool
	// wait, when not 0, is how long the client address must wait before
	// its login cookie is checked again (httpapi.Throttle).
	wait time.Duration
}

// LoggedIn reports whether the viewer may see the pages (auth off, or a
// valid login).
func (v *viewer) LoggedIn() bool { return v.access != httpapi.NoAccess }

// CanWrite reports whether the viewer may take actions.
func (v *viewer) CanWrite() bool { return v.access == httpapi.FullAccess }

// ReadOnly reports whether the viewer is logged in with a read-only token.
func (v *viewer) ReadOnly() bool { return v.access == httpapi.ReadAccess }

// AuthOn reports whether the dashboard has a login.
func (v *viewer) AuthOn() bool { return v.authOn }

// CSRF is the anti-forgery token the viewer's forms carry.
func (v *viewer) CSRF() string { return v.csrf }

// validCSRF reports, in constant time, whether a form's token is this
// viewer's.
func (v *viewer) validCSRF(got string) bool {
	return v.csrf != "" && hmac.Equal([]byte(got), []byte(v.csrf))
}

// csrfToken derives the anti-forgery token of forms from a secret: the
// login token (auth on) or the handler's random key (auth off). Another
// site can neither read it from our pages nor compute it, so a form it
// makes a browser post cannot carry it.
func csrfToken(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("readpast dashboard form token"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// authenticate reads the login cookie. A cookie is a token presented like
// any other: one that is not valid spends one of the client address's
// attempts, and while the address has none left it is not checked
// (httpapi.Throttle). The static files need no login, and their requests'
// cookies are not looked at.
func (h *Handler) authenticate(r *http.Request) *viewer {
	v := &viewer{authOn: h.guard.AuthOn()}
	if !v.authOn {
		v.access = httpapi.FullAccess
		v.csrf = csrfToken(h.csrfKey)
		return v
	}
	token := cookieToken(r)
	if token == "" || strings.HasPrefix(r.URL.Path, "/static/") {
		return v
	}
	v.access, v.wait = h.throttle.TokenAccess(r, h.guard, token)
	switch {
	case v.wait > 0:
		// Not checked: the address has no try left (see needLogin).
	case v.access == httpapi.NoAccess:
		v.badCookie = true
	default:
		v.csrf = csrfToken([]byte(token))
	}
	return v
}

// clearBadCookie tells the browser to drop a login cookie that holds a
// token that is not valid, so that it is not presented, and counted as a
// failed attempt, again.
func clearBadCookie(w http.ResponseWriter, v *viewer) {
	if v.badCookie {
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1,
			Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	}
}

// tooManyAttempts answers a request refused by the throttle: the login
// page (login) or an error page saying how long to wait, with status 429
// and Retry-After.
func (h *Handler) tooManyAttempts(w http.ResponseWriter, r *http.Request, v *viewer, wait time.Duration, next string, login bool) {
	secs := int(wait / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	unit := "seconds"
	if secs == 1 {
		unit = "second"
	}
	msg := fmt.Sprintf("Too many failed logins from your address. Wait %d %s, then try again.", secs, unit)
	if !login {
		h.errorPage(w, r, v, http.StatusTooManyRequests, msg)
		return
	}
	d := loginData{Next: next, Message: msg, Insecure: !h.secureContext(r)}
	h.render(w, r, v, http.StatusTooManyRequests, "login", page{Title: "Log in", Data: d})
}

// cookieToken returns the token the login cookie holds, or "".
func cookieToken(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ""
	}
	return string(b)
}

type viewerKey struct{}

func withViewer(r *http.Request, v *viewer) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), viewerKey{}, v))
}

func viewerOf(r *http.Request) *viewer {
	v, _ := r.Context().Value(viewerKey{}).(*viewer)
	if v == nil {
		v = &viewer{}
	}
	return v
}

// needLogin answers a request that needs a login it does not have. A page
// sends the browser to the login page, which comes back here afterwards.
// A page reached from another site comes first through a page that
// reloads it: a SameSite=Strict cookie is not sent with a navigation that
// starts on another site, but is with one that starts here.
func (h *Handler) needLogin(w http.ResponseWriter, r *http.Request, v *viewer) {
	if v.wait > 0 {
		h.tooManyAttempts(w, r, v, v.wait, "", false)
		return
	}
	clearBadCookie(w, v)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.errorPage(w, r, v, http.StatusUnauthorized, "Your login has ended. Log in again, then retry.")
		return
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" && r.Header.Get("Sec-Fetch-Mode") == "navigate" {
		h.render(w, r, v, http.StatusOK, "reload", page{Title: "Opening the dashboard"})
		return
	}
	if r.URL.Path == "/overview/live" {
		// The live refresh's fetch: the page reloads itself to the login.
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "login needed", http.StatusUnauthorized)
		return
	}
	q := url.Values{"next": {r.URL.RequestURI()}}
	if cookieToken(r) != "" {
		q.Set("ended", "1")
	}
	http.Redirect(w, r, "/login?"+q.Encode(), http.StatusSeeOther)
}

// loginData is what the login page shows.
type loginData struct {
	Next    string
	Message string
	// Insecure: the page was not reached over HTTPS nor on a loopback
	// host, so the browser will not keep the Secure cookie.
	Insecure bool
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	next := localPath(r.URL.Query().Get("next"))
	if !v.authOn || v.access != httpapi.NoAccess {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if v.wait > 0 {
		h.tooManyAttempts(w, r, v, v.wait, next, true)
		return
	}
	clearBadCookie(w, v)
	d := loginData{Next: next, Insecure: !h.secureContext(r)}
	if r.URL.Query().Get("ended") != "" {
		d.Message = "Your login has ended (the token is no longer accepted). Log in again."
	}
	h.render(w, r, v, http.StatusOK, "login", page{Title: "Log in", Data: d})
}

// login checks the token and keeps it in the login cookie. A token that
// is not valid spends one of the client address's attempts; while the
// address has none left, the token is not checked (httpapi.Throttle).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.errorPage(w, r, v, http.StatusBadRequest, "The form could not be read.")
		return
	}
	next := localPath(r.PostForm.Get("next"))
	if !v.authOn {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	access, wait := httpapi.NoAccess, v.wait
	if wait == 0 {
		access, wait = h.throttle.TokenAccess(r, h.guard, token)
	}
	if wait > 0 {
		h.tooManyAttempts(w, r, v, wait, next, true)
		return
	}
	if access == httpapi.NoAccess {
		clearBadCookie(w, v)
		d := loginData{Next: next, Message: "That token is not valid.", Insecure: !h.secureContext(r)}
		h.render(w, r, v, http.StatusUnauthorized, "login", page{Title: "Log in", Data: d})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    base64.RawURLEncoding.EncodeToString([]byte(token)),
		Path:     "/",
		MaxAge:   int(h.loginAge.Seconds()),
		Secure:   true,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/login/check?"+url.Values{"next": {next}}.Encode(), http.StatusSeeOther)
}

// loginCheck follows a login: when the browser sent the cookie back it
// goes on to the page it came for, else the login page says why the
// browser did not keep it.
func (h *Handler) loginCheck(w http.ResponseWriter, r *http.Request) {
	v := viewerOf(r)
	next := localPath(r.URL.Query().Get("next"))
	if !v.authOn || v.access != httpapi.NoAccess {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if v.wait > 0 {
		h.tooManyAttempts(w, r, v, v.wait, next, true)
		return
	}
	clearBadCookie(w, v)
	d := loginData{Next: next, Insecure: !h.secureContext(r),
		Message: "Your browser did not keep the login cookie. It is a Secure cookie: open the dashboard over HTTPS, " +
			"or as http://localhost or http://127.0.0.1 (an SSH tunnel works), and check that cookies are allowed."}
	h.render(w, r, v, http.StatusOK, "login", page{Title: "Log in", Data: d})
}

// logout clears the login cookie.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request, _ *viewer) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// secureContext reports whether a browser treats the page as a secure
// context, where it keeps Secure cookies: HTTPS (directly, or through a
// trusted proxy that says so with X-Forwarded-Proto), or a loopback host.
func (h *Handler) secureContext(r *http.Request) bool {
	if h.throttle.ViaHTTPS(r) {
		return true
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(strings.ToLower(host), "[]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// localPath returns p if it is a path on this site, else "/": a link or
// form cannot send the browser elsewhere after a login or an action.
func localPath(p string) string {
	if p == "" || p[0] != '/' || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n\t") {
		return "/"
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return p
}
