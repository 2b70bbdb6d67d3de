package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// checkOrigin rejects requests a web page in a browser may have made. A
// cross-origin request that could change something (not GET, HEAD or
// OPTIONS) is rejected by http.CrossOriginProtection, which reads the
// Sec-Fetch-Site and Origin headers that browsers set; clients that are not
// browsers (curl, workers) send neither and pass. While authentication is
// off, a request must also name a loopback host (or one of
// Config.AllowedHosts) in its Host header: through DNS rebinding, a hostile
// name can resolve to 127.0.0.1, making its page same-origin with the API.
// With auth on, the bearer token, which browsers never add on their own, is
// the protection, and any Host is fine.
func (s *server) checkOrigin(r *http.Request) *apiError {
	if !s.authOn && !s.hostAllowed(r.Host) {
		return &apiError{Status: http.StatusForbidden, Code: CodeHostNotAllowed,
			Message: "with authentication off, the Host must be localhost, a loopback address or an allowed host"}
	}
	if err := s.csrf.Check(r); err != nil {
		return &apiError{Status: http.StatusForbidden, Code: CodeCrossOrigin,
			Message: "cross-origin requests from browsers are not allowed", cause: err}
	}
	return nil
}

// hostAllowed reports whether a Host header value names localhost, a
// loopback address or one of the allowed hosts, on any port.
func (s *server) hostAllowed(hostport string) bool {
	name := hostName(hostport)
	if name == "" {
		return false
	}
	if name == "localhost" || s.hosts[name] {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// hostName returns the host of a Host header value ("host", "host:port",
// "[::1]:port") in lower case, without its port, IPv6 brackets or a
// trailing dot.
func hostName(hostport string) string {
	h := strings.TrimSpace(hostport)
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// authorize checks the bearer token. Tokens are compared as SHA-256 digests
// in constant time, against every configured token.
func (s *server) authorize(r *http.Request) *apiError {
	if !s.authOn {
		return nil
	}
	unauthorized := &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
		Message: "a valid bearer token is required"}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return unauthorized
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return unauthorized
	}
	sum := sha256.Sum256([]byte(token))
	full, read := 0, 0
	for i := range s.full {
		full |= subtle.ConstantTimeCompare(sum[:], s.full[i][:])
	}
	for i := range s.read {
		read |= subtle.ConstantTimeCompare(sum[:], s.read[i][:])
	}
	switch {
	case full == 1:
		return nil
	case read == 1:
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return nil
		}
		return &apiError{Status: http.StatusForbidden, Code: CodeForbidden,
			Message: "this token may only read (GET)"}
	}
	return unauthorized
}
