package httpapi

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr returns the address r came from, which the throttle counts
// its failures against. It is the peer's address (r.RemoteAddr), unless
// the peer is a trusted proxy (ThrottleConfig.TrustedProxies): then it is
// the right-most X-Forwarded-For address that is not itself a trusted
// proxy, the one the first trusted proxy saw. Addresses further left were
// written by the client, which could put anything there; so a client
// cannot dodge the throttle with the header, and from an untrusted peer
// the header is ignored. When an entry the trusted proxies wrote cannot be
// read (such as "unknown"), the left-most trusted proxy read so far is the
// client. IPv4-mapped IPv6 addresses are returned as IPv4 ones; an
// unreadable RemoteAddr gives the zero Addr, which all such requests
// share.
func (t *Throttle) ClientAddr(r *http.Request) netip.Addr {
	addr := peerAddr(r)
	if !t.isTrusted(addr) {
		return addr
	}
	hops := r.Header.Values("X-Forwarded-For")
	for i := len(hops) - 1; i >= 0; i-- {
		entries := strings.Split(hops[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			hop, ok := parseHop(entries[j])
			if !ok {
				return addr
			}
			addr = hop
			if !t.isTrusted(hop) {
				return hop
			}
		}
	}
	return addr
}

// FromTrustedProxy reports whether r's peer is a trusted proxy, whose
// X-Forwarded-* headers are believed.
func (t *Throttle) FromTrustedProxy(r *http.Request) bool {
	return t.isTrusted(peerAddr(r))
}

// ViaHTTPS reports whether r reached the server over HTTPS: r.TLS is set,
// or a trusted proxy says so with X-Forwarded-Proto: https (the value it
// appended last, when there are several).
func (t *Throttle) ViaHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !t.FromTrustedProxy(r) {
		return false
	}
	proto := r.Header.Values("X-Forwarded-Proto")
	if len(proto) == 0 {
		return false
	}
	last := proto[len(proto)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return strings.EqualFold(strings.TrimSpace(last), "https")
}

// isTrusted reports whether a is in a trusted proxy prefix.
func (t *Throttle) isTrusted(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	for _, p := range t.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr returns the address of r's peer, or the zero Addr when
// r.RemoteAddr does not hold one.
func peerAddr(r *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		return normalAddr(ap.Addr())
	}
	if a, err := netip.ParseAddr(r.RemoteAddr); err == nil {
		return normalAddr(a)
	}
	return netip.Addr{}
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a
// port ("192.0.2.1:4711", "[2001:db8::1]:4711"), or an IPv6 one in
// brackets ("[2001:db8::1]"). Anything else ("unknown", a name) cannot
// be read.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return normalAddr(a), true
	}
	if inner, ok := strings.CutPrefix(s, "["); ok {
		if inner, ok := strings.CutSuffix(inner, "]"); ok {
			if a, err := netip.ParseAddr(inner); err == nil && a.Is6() {
				return normalAddr(a), true
			}
		}
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalAddr(ap.Addr()), true
	}
	return netip.Addr{}, false
}

// normalAddr drops a's zone and IPv4 mapping.
func normalAddr(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}
