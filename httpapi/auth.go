package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Access is what a request's credentials allow.
type Access int

// The access levels, from none to full.
const (
	// NoAccess: no valid token.
	NoAccess Access = iota
	// ReadAccess: a read-only token, which may look but change nothing.
	ReadAccess
	// FullAccess: a full token, or any request while authentication is
	// off.
	FullAccess
)

// Errors Guard.CheckRequest reports.
var (
	// ErrHostNotAllowed: authentication is off and the request's Host is
	// not localhost, a loopback address or an allowed host.
	ErrHostNotAllowed = errors.New("httpapi: with authentication off, the Host must be localhost, a loopback address or an allowed host")
	// ErrCrossOrigin: a browser sent a state-changing request from
	// another origin.
	ErrCrossOrigin = errors.New("httpapi: cross-origin request")
)

// MinTokenBytes is the shortest token NewGuard accepts. A guessable token
// can be found by trying; 32 random bytes written in hex, as
// `openssl rand -hex 32` prints them, are a good token.
const MinTokenBytes = 16

// ErrShortToken: a token given to NewGuard is shorter than MinTokenBytes.
var ErrShortToken = errors.New("httpapi: token too short")

// Guard holds what the API and the dashboard check on every request: the
// tokens (kept as SHA-256 digests), the hosts answered while
// authentication is off, and cross-origin protection. It is safe for
// concurrent use.
type Guard struct {
	full, read [][sha256.Size]byte
	hosts      map[string]bool
	csrf       *http.CrossOriginProtection
}

// NewGuard returns the guard for the full and read-only tokens and the
// allowed hosts (see Config). Authentication is off when both token lists
// are empty. It fails on an empty token, a token shorter than
// MinTokenBytes (ErrShortToken) or a malformed host. Its errors never
// hold a token.
func NewGuard(tokens, readTokens, allowedHosts []string) (*Guard, error) {
	g := &Guard{hosts: map[string]bool{}, csrf: http.NewCrossOriginProtection()}
	var err error
	if g.full, err = tokenDigests(tokens, "Config.Tokens"); err != nil {
		return nil, err
	}
	if g.read, err = tokenDigests(readTokens, "Config.ReadTokens"); err != nil {
		return nil, err
	}
	for _, h := range allowedHosts {
		name := hostName(h)
		if name == "" {
			return nil, fmt.Errorf("httpapi: bad host %q in Config.AllowedHosts", h)
		}
		g.hosts[name] = true
	}
	return g, nil
}

// tokenDigests checks the tokens of the list named field and returns
// their SHA-256 digests.
func tokenDigests(tokens []string, field string) ([][sha256.Size]byte, error) {
	var sums [][sha256.Size]byte
	for i, t := range tokens {
		switch {
		case t == "":
			return nil, fmt.Errorf("httpapi: empty token in %s", field)
		case len(t) < MinTokenBytes:
			return nil, fmt.Errorf("%w: %s[%d] is %d bytes, and a token must be at least %d (make one with `openssl rand -hex 32`)",
				ErrShortToken, field, i, len(t), MinTokenBytes)
		}
		sums = append(sums, sha256.Sum256([]byte(t)))
	}
	return sums, nil
}

// AuthOn reports whether requests need a token.
func (g *Guard) AuthOn() bool { return len(g.full) > 0 || len(g.read) > 0 }

// CheckRequest rejects requests a web page in a browser may have made. A
// cross-origin request that could change something (not GET, HEAD or
// OPTIONS) is rejected with ErrCrossOrigin by http.CrossOriginProtection,
// which reads the Sec-Fetch-Site and Origin headers that browsers set;
// clients that are not browsers (curl, workers) send neither and pass.
// While authentication is off, a request must also name a loopback host
// (or an allowed host) in its Host header, else ErrHostNotAllowed: through
// DNS rebinding, a hostile name can resolve to 127.0.0.1, making its page
// same-origin with the server. With auth on, the token, which browsers
// never add on their own, is the protection, and any Host is fine.
func (g *Guard) CheckRequest(r *http.Request) error {
	if !g.AuthOn() && !g.HostAllowed(r.Host) {
		return ErrHostNotAllowed
	}
	if err := g.csrf.Check(r); err != nil {
		return fmt.Errorf("%w: %w", ErrCrossOrigin, err)
	}
	return nil
}

// HostAllowed reports whether a Host header value names localhost, a
// loopback address or one of the allowed hosts, on any port.
func (g *Guard) HostAllowed(hostport string) bool {
	name := hostName(hostport)
	if name == "" {
		return false
	}
	if name == "localhost" || g.hosts[name] {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// TokenAccess returns what token allows: FullAccess for any token while
// authentication is off. Tokens are compared as SHA-256 digests in
// constant time, against every configured token.
func (g *Guard) TokenAccess(token string) Access {
	if !g.AuthOn() {
		return FullAccess
	}
	if token == "" {
		return NoAccess
	}
	sum := sha256.Sum256([]byte(token))
	full, read := 0, 0
	for i := range g.full {
		full |= subtle.ConstantTimeCompare(sum[:], g.full[i][:])
	}
	for i := range g.read {
		read |= subtle.ConstantTimeCompare(sum[:], g.read[i][:])
	}
	switch {
	case full == 1:
		return FullAccess
	case read == 1:
		return ReadAccess
	}
	return NoAccess
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

// checkOrigin is CheckRequest as an API error.
func (s *server) checkOrigin(r *http.Request) *apiError {
	err := s.guard.CheckRequest(r)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrHostNotAllowed):
		return &apiError{Status: http.StatusForbidden, Code: CodeHostNotAllowed,
			Message: "with authentication off, the Host must be localhost, a loopback address or an allowed host"}
	}
	return &apiError{Status: http.StatusForbidden, Code: CodeCrossOrigin,
		Message: "cross-origin requests from browsers are not allowed", cause: err}
}

// authorize checks the bearer token: a read-only token may only GET. A
// request with an Authorization header goes through the throttle, which
// answers 429 too_many_attempts, and how long to wait, while the client's
// failures have emptied its bucket.
func (s *server) authorize(r *http.Request) (*apiError, time.Duration) {
	if !s.guard.AuthOn() {
		return nil, 0
	}
	unauthorized := &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
		Message: "a valid bearer token is required"}
	header := r.Header.Get("Authorization")
	if header == "" {
		return unauthorized, 0
	}
	if len(r.Header.Values("Authorization")) > 1 {
		// Which of two credentials a proxy or a server reads differs:
		// neither is taken.
		return &apiError{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
			Message: "send one Authorization header, not several"}, 0
	}
	token := ""
	if scheme, t, ok := strings.Cut(header, " "); ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(t)
	}
	access, wait := s.throttle.TokenAccess(r, s.guard, token)
	switch {
	case wait > 0:
		return &apiError{Status: http.StatusTooManyRequests, Code: CodeTooManyAttempts,
			Message: fmt.Sprintf("too many failed authentication attempts from this address: retry after %d seconds", int(wait/time.Second))}, wait
	case access == FullAccess:
		return nil, 0
	case access == ReadAccess:
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return nil, 0
		}
		return &apiError{Status: http.StatusForbidden, Code: CodeForbidden,
			Message: "this token may only read (GET)"}, 0
	}
	return unauthorized, 0
}
