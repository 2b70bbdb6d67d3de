package dashboard

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/sqlite"
)

// throttleClock is a clock that moves only when told.
type throttleClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *throttleClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *throttleClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// throttledEnv is a dashboard with tokens whose throttle runs on clock,
// reports to reg and trusts the proxies in trusted.
func throttledEnv(t *testing.T, clock *throttleClock, reg *prometheus.Registry, trusted ...string) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "dash.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var prefixes []netip.Prefix
	for _, p := range trusted {
		prefixes = append(prefixes, netip.MustParsePrefix(p))
	}
	th, err := httpapi.NewThrottle(httpapi.ThrottleConfig{TrustedProxies: prefixes, Registry: reg, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Store: st, Tokens: []string{fullToken}, ReadTokens: []string{readToken}, Throttle: th})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, h: h, srv: httptest.NewServer(h)}
	t.Cleanup(func() {
		e.srv.Close()
		h.Close()
		st.Close()
	})
	return e
}

// loginFrom posts token to the login form as the client at forwardedFor
// (through the trusted proxy the test runs as).
func (e *env) loginFrom(forwardedFor, token string) resp {
	e.t.Helper()
	return e.do(req{method: "POST", path: "/login", form: url.Values{"token": {token}, "next": {"/jobs"}},
		header: map[string]string{"X-Forwarded-For": forwardedFor}})
}

// authFailureCounts returns readpast_auth_failures_total by outcome.
func authFailureCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "readpast_auth_failures_total" {
			for _, m := range mf.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	return got
}

// TestLoginThrottle: a burst of wrong logins from one address gets the
// login page with "not valid" up to the burst, then 429 with Retry-After
// and a message that says how long to wait, even for the right token,
// which is not checked; another address logs in and browses throughout. A
// wrong login cookie counts as a failed login, and is cleared. The
// address gets one more try per refill.
func TestLoginThrottle(t *testing.T) {
	clock := &throttleClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	e := throttledEnv(t, clock, reg, "127.0.0.1/32")
	const guesser, viewer = "203.0.113.7", "198.51.100.20"
	browse := func() {
		t.Helper()
		r := e.do(req{path: "/", token: fullToken, header: map[string]string{"X-Forwarded-For": viewer}})
		if r.status != http.StatusOK || !strings.Contains(r.body, "<h1>Overview</h1>") {
			t.Fatalf("the logged-in viewer on another address: %d", r.status)
		}
	}
	for i := range httpapi.DefaultThrottleBurst - 1 {
		r := e.loginFrom(guesser, fmt.Sprintf("wrong-token-%02d-0123456789", i))
		if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "That token is not valid.") {
			t.Fatalf("wrong login %d: %d", i+1, r.status)
		}
		browse()
	}
	// A login cookie that is not valid counts too, and is cleared.
	r := e.do(req{path: "/jobs", token: "revoked-token-0123456789", header: map[string]string{"X-Forwarded-For": guesser}})
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "ended=1") ||
		!strings.HasPrefix(r.header.Get("Set-Cookie"), cookieName+"=; Path=/; Max-Age=0") {
		t.Fatalf("a wrong cookie: %d to %q, Set-Cookie %q", r.status, r.header.Get("Location"), r.header.Get("Set-Cookie"))
	}
	wantThrottled := func(what string, r resp, login bool) {
		t.Helper()
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "6" ||
			!strings.Contains(r.body, "Too many failed logins from your address. Wait 6 seconds, then try again.") ||
			r.header.Get("Set-Cookie") != "" {
			t.Fatalf("%s: %d, Retry-After %q, Set-Cookie %q\n%s", what, r.status, r.header.Get("Retry-After"), r.header.Get("Set-Cookie"), r.body)
		}
		if login != strings.Contains(r.body, `<label for="token">Access token</label>`) {
			t.Errorf("%s: the login form shown: %v, want %v", what, !login, login)
		}
	}
	wantThrottled("a wrong login past the burst", e.loginFrom(guesser, "wrong-token-xx-0123456789"), true)
	wantThrottled("the right token from the throttled address", e.loginFrom(guesser, fullToken), true)
	// A valid cookie from the guesser's address is not checked either: a
	// viewer sharing the address with a guesser waits too.
	wantThrottled("a page with a cookie from the throttled address",
		e.do(req{path: "/jobs", token: fullToken, header: map[string]string{"X-Forwarded-For": guesser}}), false)
	wantThrottled("the login page with a cookie from the throttled address",
		e.do(req{path: "/login", token: fullToken, header: map[string]string{"X-Forwarded-For": guesser}}), true)
	// Without a cookie, the login page shows; the static files need no
	// login, and their cookies are not looked at.
	if r := e.do(req{path: "/login", header: map[string]string{"X-Forwarded-For": guesser}}); r.status != http.StatusOK {
		t.Errorf("the login page without a cookie from the throttled address: %d", r.status)
	}
	if r := e.do(req{path: "/static/style.css", token: fullToken, header: map[string]string{"X-Forwarded-For": guesser}}); r.status != http.StatusOK {
		t.Errorf("a static file from the throttled address: %d", r.status)
	}
	browse()
	if r := e.loginFrom(viewer, readToken); r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Set-Cookie"), cookieName+"=") {
		t.Errorf("a login on another address: %d, Set-Cookie %q", r.status, r.header.Get("Set-Cookie"))
	}
	if got := authFailureCounts(t, reg); got["refused"] != httpapi.DefaultThrottleBurst || got["throttled"] != 4 {
		t.Errorf("readpast_auth_failures_total = %v, want refused %d, throttled 4", got, httpapi.DefaultThrottleBurst)
	}

	// 6 seconds later the address has one more try, which a right token
	// uses without spending it.
	clock.Add(5 * time.Second)
	if r := e.loginFrom(guesser, fullToken); r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "1" ||
		!strings.Contains(r.body, "Wait 1 second, then") {
		t.Errorf("5s later: %d, Retry-After %q", r.status, r.header.Get("Retry-After"))
	}
	clock.Add(time.Second)
	for range 2 {
		if r := e.loginFrom(guesser, fullToken); r.status != http.StatusSeeOther || r.header.Get("Location") != "/login/check?next=%2Fjobs" {
			t.Errorf("the right token 6s later: %d to %q", r.status, r.header.Get("Location"))
		}
	}
	if r := e.loginFrom(guesser, "wrong-token-yy-0123456789"); r.status != http.StatusUnauthorized {
		t.Errorf("a wrong login 6s later: %d, want 401", r.status)
	}
	wantThrottled("the next wrong login", e.loginFrom(guesser, "wrong-token-zz-0123456789"), true)
}

// TestLoginThrottleConcurrent: of many wrong logins sent at once from one
// address, exactly the burst is checked, while logins from another
// address all succeed.
func TestLoginThrottleConcurrent(t *testing.T) {
	clock := &throttleClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	e := throttledEnv(t, clock, nil, "127.0.0.1/32")
	var mu sync.Mutex
	counts := map[int]int{}
	ok := 0
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			r := e.loginFrom("203.0.113.7", fmt.Sprintf("wrong-token-%02d-0123456789", i))
			mu.Lock()
			defer mu.Unlock()
			counts[r.status]++
		})
		wg.Go(func() {
			r := e.loginFrom(fmt.Sprintf("198.51.100.%d", i+1), fullToken)
			mu.Lock()
			defer mu.Unlock()
			if r.status == http.StatusSeeOther {
				ok++
			}
		})
	}
	wg.Wait()
	if counts[http.StatusUnauthorized] != httpapi.DefaultThrottleBurst || counts[http.StatusTooManyRequests] != 40-httpapi.DefaultThrottleBurst || ok != 40 {
		t.Errorf("wrong logins by status %v, %d of 40 right ones went through; want %d 401s", counts, ok, httpapi.DefaultThrottleBurst)
	}
}

// TestLoginBehindProxy: behind a TLS-terminating reverse proxy that the
// dashboard trusts, the login page knows it was reached over HTTPS, a
// browser's login (Origin and Sec-Fetch-Site as browsers send them) keeps
// its Secure cookie and reaches the page it came for, and the throttle
// tells the clients behind the proxy apart. From a peer that is not
// trusted, X-Forwarded-Proto is ignored.
func TestLoginBehindProxy(t *testing.T) {
	clock := &throttleClock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	backend := throttledEnv(t, clock, nil, "127.0.0.1/32")
	target, err := url.Parse(backend.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host // as nginx's proxy_set_header Host $host
		pr.SetXForwarded()
	}})
	t.Cleanup(proxy.Close)
	// clientAt returns a browser-like client that connects to the proxy
	// from ip, keeps cookies and follows redirects.
	clientAt := func(ip string) *http.Client {
		tr := proxy.Client().Transport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Jar: jar}
	}
	login := func(c *http.Client, token string, hdr map[string]string) (*http.Response, string) {
		t.Helper()
		r, err := http.NewRequest("POST", proxy.URL+"/login", strings.NewReader(url.Values{"token": {token}, "next": {"/jobs"}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		return send(t, c, r)
	}
	browser := map[string]string{"Origin": proxy.URL, "Sec-Fetch-Site": "same-origin"}

	alice := clientAt("127.0.0.2")
	// As the proxy's public name (not a loopback one, where any page is a
	// secure context), the page knows from the proxy that it came over
	// HTTPS.
	page, body := get(t, alice, proxy.URL+"/login", "dash.example.com")
	if page.StatusCode != http.StatusOK || strings.Contains(body, "not reached over HTTPS") {
		t.Fatalf("the login page through the proxy: %d, or it says it was not reached over HTTPS:\n%s", page.StatusCode, body)
	}
	res, body := login(alice, fullToken, browser)
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/jobs" || !strings.Contains(body, "<h1>Jobs</h1>") {
		t.Fatalf("login through the proxy ended at %s with %d:\n%s", res.Request.URL, res.StatusCode, body)
	}
	u, _ := url.Parse(proxy.URL)
	if cs := alice.Jar.Cookies(u); len(cs) != 1 || cs[0].Name != cookieName {
		t.Errorf("cookies kept for the proxy's origin: %v", cs)
	}
	// A browser that sends Origin but not Sec-Fetch-Site: Origin is
	// checked against the Host the proxy passed on.
	if res, _ := login(clientAt("127.0.0.3"), readToken, map[string]string{"Origin": proxy.URL}); res.StatusCode != http.StatusOK || res.Request.URL.Path != "/jobs" {
		t.Errorf("login with Origin only: %d at %s", res.StatusCode, res.Request.URL)
	}

	// A guesser behind the proxy is throttled, and only it.
	mallory := clientAt("127.0.0.4")
	for i := range httpapi.DefaultThrottleBurst + 1 {
		want := http.StatusUnauthorized
		if i == httpapi.DefaultThrottleBurst {
			want = http.StatusTooManyRequests
		}
		// A forged X-Forwarded-For does not help: the proxy appends the
		// address it saw, and only that one counts.
		res, _ := login(mallory, "wrong-token-0123456789", map[string]string{
			"Origin": proxy.URL, "Sec-Fetch-Site": "same-origin", "X-Forwarded-For": fmt.Sprintf("192.0.2.%d", i+1)})
		if res.StatusCode != want {
			t.Fatalf("wrong login %d through the proxy: %d, want %d", i+1, res.StatusCode, want)
		}
	}
	if res, body := get(t, alice, proxy.URL+"/", ""); res.StatusCode != http.StatusOK || !strings.Contains(body, "<h1>Overview</h1>") {
		t.Errorf("the logged-in client on another address: %d", res.StatusCode)
	}

	// From a peer that is not a trusted proxy, a client's own
	// X-Forwarded-Proto is not believed.
	untrusting := throttledEnv(t, clock, nil)
	r := untrusting.do(req{path: "/login", header: map[string]string{"Host": "dash.example.com", "X-Forwarded-Proto": "https"}})
	if r.status != http.StatusOK || !strings.Contains(r.body, "not reached over HTTPS") {
		t.Errorf("X-Forwarded-Proto from an untrusted peer hid the warning: %d\n%s", r.status, r.body)
	}
}

// get fetches u with c; host, when not empty, is the Host header.
func get(t *testing.T, c *http.Client, u, host string) (*http.Response, string) {
	t.Helper()
	r, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Host = host
	return send(t, c, r)
}

// send sends r with c and reads the body.
func send(t *testing.T, c *http.Client, r *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}
