package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast/httpapi"
)

// serveToken is a token long enough for serve.
const serveToken = "serve-token-3f9a6c1e8b7d4a20"

// TestServeRefusesShortTokens: serve refuses tokens shorter than 16 bytes,
// from flags or the environment, with a usage error (exit 2) that says
// where the token came from and how to make a good one, without the token
// itself, and before it creates the database.
func TestServeRefusesShortTokens(t *testing.T) {
	for _, c := range []struct {
		name      string
		args, env []string
		want      string
	}{
		{"flag", []string{"--token", "adminsecret"}, nil, "--token #1 is 11 bytes"},
		{"second flag", []string{"--token", serveToken, "--token", "adminsecret"}, nil, "--token #2 is 11 bytes"},
		{"read flag", []string{"--token", serveToken, "--read-token", "adminsecret"}, nil, "--read-token #1 is 11 bytes"},
		{"env", nil, []string{envTokens, serveToken + ",adminsecret"}, "token 2 of $READPAST_TOKENS is 11 bytes"},
		{"read env", nil, []string{envReadTokens, "adminsecret"}, "token 1 of $READPAST_READ_TOKENS is 11 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(envTokens, "")
			t.Setenv(envReadTokens, "")
			if c.env != nil {
				t.Setenv(c.env[0], c.env[1])
			}
			db := filepath.Join(t.TempDir(), "serve.db")
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--database-url", db}, c.args...)
			code := run(context.Background(), args, &stdout, &stderr)
			msg := stderr.String()
			if code != 2 || !strings.Contains(msg, c.want) || !strings.Contains(msg, "at least 16 bytes") ||
				!strings.Contains(msg, "openssl rand -hex 32") || strings.Contains(msg, "adminsecret") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q, the minimum and openssl rand -hex 32, without the token", code, msg, c.want)
			}
			if _, err := os.Stat(db); err == nil {
				t.Error("serve created the database before refusing its tokens")
			}
		})
	}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--trusted-proxy", "10.0.0.0/33"}, io.Discard, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), `--trusted-proxy "10.0.0.0/33" is not an address or a CIDR range`) {
		t.Errorf("a bad --trusted-proxy: exit %d, stderr %s", code, stderr.String())
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := parseTrustedProxies([]string{"10.1.2.3/8", " 192.0.2.7 ", "fd00::/8", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[10.0.0.0/8 192.0.2.7/32 fd00::/8 ::1/128]" {
		t.Errorf("parseTrustedProxies = %v", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.example.com", "10.0.0"} {
		if _, err := parseTrustedProxies([]string{bad}); err == nil {
			t.Errorf("parseTrustedProxies accepted %q", bad)
		}
	}
}

// serveInProcess runs `readpast serve` with args in this process until
// the test ends, and returns its base URL.
func serveInProcess(t *testing.T, args ...string) string {
	t.Helper()
	t.Setenv(envTokens, "")
	t.Setenv(envReadTokens, "")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	args = append([]string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json",
		"--database-url", filepath.Join(t.TempDir(), "serve.db")}, args...)
	go func() {
		done <- run(ctx, args, io.Discard, pw)
		pw.Close()
	}()
	log := &lockedBuffer{}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "listening" {
				listening <- fmt.Sprint(rec["addr"])
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d:\n%s", code, log.String())
		}
		if strings.Contains(log.String(), serveToken) || strings.Contains(log.String(), "wrong-token") {
			t.Errorf("serve logged a token:\n%s", log.String())
		}
	})
	select {
	case addr := <-listening:
		return "http://" + addr
	case code := <-done:
		t.Fatalf("serve exited %d:\n%s", code, log.String())
	case <-time.After(time.Minute):
		t.Fatalf("serve did not start:\n%s", log.String())
	}
	return ""
}

// call sends one request to base with the bearer token (none when empty)
// as the client forwardedFor, and returns the status and Retry-After.
func call(t *testing.T, method, u, token, forwardedFor string, form url.Values) (int, string, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Forwarded-For", forwardedFor)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// TestServeThrottle: serve's API and dashboard share one throttle of
// failed authentication, keyed by the client address that
// --trusted-proxy lets X-Forwarded-For give; without the flag the header
// is ignored, and every client behind one address shares its bucket. The
// metric counts the refusals.
func TestServeThrottle(t *testing.T) {
	base := serveInProcess(t, "--token", serveToken, "--trusted-proxy", "127.0.0.1")
	const guesser, worker = "203.0.113.7", "198.51.100.20"
	for i := range httpapi.DefaultThrottleBurst {
		if st, _, _ := call(t, "GET", base+"/v1/stats", fmt.Sprintf("wrong-token-%02d-0123456789", i), guesser, nil); st != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i+1, st)
		}
		if st, _, _ := call(t, "GET", base+"/v1/stats", serveToken, worker, nil); st != http.StatusOK {
			t.Fatalf("the valid client: %d", st)
		}
	}
	if st, retry, body := call(t, "GET", base+"/v1/stats", "wrong-token-xx-0123456789", guesser, nil); st != http.StatusTooManyRequests ||
		retry != "6" || !strings.Contains(body, `"too_many_attempts"`) {
		t.Errorf("past the burst: %d, Retry-After %q, %s", st, retry, body)
	}
	// The dashboard counts with the API.
	login := url.Values{"token": {serveToken}, "next": {"/"}}
	if st, retry, body := call(t, "POST", base+"/login", "", guesser, login); st != http.StatusTooManyRequests || retry != "6" ||
		!strings.Contains(body, "Too many failed logins from your address") {
		t.Errorf("a login from the throttled address: %d, Retry-After %q", st, retry)
	}
	if st, _, _ := call(t, "POST", base+"/login", "", worker, login); st != http.StatusSeeOther {
		t.Errorf("a login from another address: %d", st)
	}
	_, _, metrics := call(t, "GET", base+"/metrics", serveToken, worker, nil)
	for _, want := range []string{`readpast_auth_failures_total{outcome="refused"} 10`, `readpast_auth_failures_total{outcome="throttled"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Without --trusted-proxy, X-Forwarded-For does not tell the clients
	// apart: they are all 127.0.0.1.
	base = serveInProcess(t, "--token", serveToken)
	for i := range httpapi.DefaultThrottleBurst {
		if st, _, _ := call(t, "GET", base+"/v1/stats", "wrong-token-0123456789", fmt.Sprintf("192.0.2.%d", i+1), nil); st != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i+1, st)
		}
	}
	if st, _, _ := call(t, "GET", base+"/v1/stats", serveToken, worker, nil); st != http.StatusTooManyRequests {
		t.Errorf("a valid token behind the same address, X-Forwarded-For not trusted: %d, want 429", st)
	}
}
