package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"testing"
)

// send makes a request with e's token and extra headers; host, when not
// empty, replaces the Host header.
func (e *testEnv) send(method, path, body, host string, hdr map[string]string) (int, []byte) {
	e.t.Helper()
	return e.request(context.Background(), method, path, body, e.token, host, hdr)
}

// crossSite is what a browser sends with a request that a page on
// https://evil.example makes to the API.
var crossSite = map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}

func TestCrossOriginRequestsRejected(t *testing.T) {
	for _, auth := range []bool{false, true} {
		e := newEnv(t, func(c *Config) {
			if auth {
				c.Tokens = []string{"secret-0123456789abcdef"}
			}
		})
		if auth {
			e.token = "secret-0123456789abcdef"
		}
		j := e.enqueue(`{"kind":"a"}`)
		id := itoa(j.ID)
		before := e.fingerprint()

		// What a form or fetch() on another site can send without a CORS
		// preflight: text/plain and form bodies, and empty bodies.
		textPlain := map[string]string{"Content-Type": "text/plain"}
		form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
		for _, c := range []struct {
			path, body string
			hdr        map[string]string
		}{
			{"/v1/jobs", `{"kind":"evil"}`, textPlain},
			{"/v1/jobs", `{"kind":"evil"}`, form},
			{"/v1/jobs/batch", `{"jobs":[{"kind":"evil"}]}`, textPlain},
			{"/v1/claim", `{"worker":"evil"}`, textPlain},
			{"/v1/jobs/" + id + "/cancel", ``, nil},
			{"/v1/jobs/" + id + "/retry", ``, nil},
		} {
			for _, site := range []map[string]string{
				crossSite,
				{"Sec-Fetch-Site": "same-site", "Origin": "http://other.localhost"},
				// A browser without Sec-Fetch-Site: Origin does not match Host.
				{"Origin": "https://evil.example"},
			} {
				hdr := map[string]string{}
				for k, v := range c.hdr {
					hdr[k] = v
				}
				for k, v := range site {
					hdr[k] = v
				}
				st, b := e.send("POST", c.path, c.body, "", hdr)
				checkError(t, "cross-origin POST "+c.path, st, b, http.StatusForbidden, CodeCrossOrigin, "")
			}
		}
		if after := e.fingerprint(); after != before {
			t.Errorf("auth %v: cross-origin requests changed the store:\n%s\nwant\n%s", auth, after, before)
		}

		// Same-origin requests, and requests from clients that are not
		// browsers (curl -d sends a form content type), go through.
		u, err := url.Parse(e.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		for _, hdr := range []map[string]string{
			{"Origin": e.srv.URL, "Sec-Fetch-Site": "same-origin"},
			{"Origin": "http://" + u.Host},
			{"Sec-Fetch-Site": "none"},
			{"Content-Type": "application/x-www-form-urlencoded"},
			{"Content-Type": "text/plain"},
			{},
		} {
			if st, b := e.send("POST", "/v1/jobs", `{"kind":"ok"}`, "", hdr); st != http.StatusCreated {
				t.Errorf("auth %v: POST with %v: %d %s", auth, hdr, st, b)
			}
		}
		// Safe methods are never cross-origin writes.
		if st, b := e.send("GET", "/v1/jobs/"+id, "", "", crossSite); st != http.StatusOK {
			t.Errorf("auth %v: cross-origin GET: %d %s", auth, st, b)
		}
	}
}

func TestHostCheckWithAuthOff(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.AllowedHosts = []string{"Queue.Internal."} })
	for _, host := range []string{
		"localhost", "localhost:8080", "LOCALHOST.:1", "127.0.0.1", "127.0.0.1:8080", "127.9.9.9:1",
		"[::1]:8080", "[::1]", "queue.internal", "QUEUE.internal:9000",
	} {
		if st, b := e.send("POST", "/v1/jobs", `{"kind":"a"}`, host, nil); st != http.StatusCreated {
			t.Errorf("Host %q: %d %s", host, st, b)
		}
	}
	before := e.fingerprint()
	for _, host := range []string{
		"evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.evil.example",
		"other.internal", "0.0.0.0:8080", "10.0.0.1", "[::]:8080",
	} {
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/v1/jobs", `{"kind":"evil"}`},
			{"POST", "/v1/claim", `{"worker":"evil"}`},
			{"GET", "/v1/jobs", ``},
			{"GET", "/v1/stats", ``},
			{"GET", "/healthz", ``},
			{"GET", "/nope", ``},
		} {
			// DNS rebinding: the page is same-origin with its own name.
			hdr := map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}
			st, b := e.send(c.method, c.path, c.body, host, hdr)
			checkError(t, c.method+" "+c.path+" Host "+host, st, b, http.StatusForbidden, CodeHostNotAllowed, "")
		}
	}
	if after := e.fingerprint(); after != before {
		t.Errorf("requests for other hosts changed the store")
	}
}

func TestHostNotCheckedWithAuthOn(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Tokens = []string{"secret-0123456789abcdef"} })
	e.token = "secret-0123456789abcdef"
	if st, b := e.send("POST", "/v1/jobs", `{"kind":"a"}`, "queue.example.com", nil); st != http.StatusCreated {
		t.Errorf("POST with Host queue.example.com: %d %s", st, b)
	}
	if st, b := e.send("GET", "/v1/stats", "", "evil.example:443", nil); st != http.StatusOK {
		t.Errorf("GET with Host evil.example: %d %s", st, b)
	}
	// The token is still required.
	e.token = ""
	st, b := e.send("GET", "/v1/stats", "", "evil.example", nil)
	checkError(t, "GET without a token", st, b, http.StatusUnauthorized, CodeUnauthorized, "")
}

func TestNewRejectsBadAllowedHosts(t *testing.T) {
	e := newEnv(t, nil)
	for _, hosts := range [][]string{{""}, {"ok", " "}, {"[]"}} {
		if _, err := New(Config{Store: e.store, AllowedHosts: hosts}); err == nil {
			t.Errorf("New accepted AllowedHosts %q", hosts)
		}
	}
}
