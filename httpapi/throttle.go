package httpapi

import (
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Defaults and bounds of ThrottleConfig.
const (
	// DefaultThrottleBurst is ThrottleConfig.Burst's default.
	DefaultThrottleBurst = 10
	// DefaultThrottleEvery is ThrottleConfig.Every's default.
	DefaultThrottleEvery = 6 * time.Second
	// MaxThrottleEvery is the longest ThrottleConfig.Every.
	MaxThrottleEvery = 24 * time.Hour
	// DefaultThrottleMaxAddresses is ThrottleConfig.MaxAddresses' default.
	DefaultThrottleMaxAddresses = 1 << 16
)

// networkBucketCount is how many buckets the networks of the addresses
// past ThrottleConfig.MaxAddresses share.
const networkBucketCount = 4096

// ThrottleConfig configures NewThrottle.
type ThrottleConfig struct {
	// Burst is how many failed attempts in a row a client address may
	// make before it must wait; 0 means DefaultThrottleBurst.
	Burst int
	// Every is how long an address that used up its attempts waits for
	// each further one; 0 means DefaultThrottleEvery, and it may be at
	// most MaxThrottleEvery. An address that fails no more for Burst ×
	// Every has all its attempts back.
	Every time.Duration
	// MaxAddresses bounds the addresses the throttle remembers at once:
	// only addresses with failed attempts not yet refilled are kept. Past
	// MaxAddresses, the attempts of further addresses count by network
	// (IPv4 /24, IPv6 /48): each network has two of 4,096 buckets,
	// picked by a hash with a key of the throttle's own, spends
	// from both and is refused while both are empty. A flood from one
	// network so empties only buckets of its own; another network is held
	// up only if floods empty both of its buckets. 0 means
	// DefaultThrottleMaxAddresses.
	MaxAddresses int
	// TrustedProxies are the addresses of the reverse proxies in front
	// of the server. A request whose peer is in one of them is counted
	// against the right-most X-Forwarded-For address that is not itself a
	// trusted proxy, and its X-Forwarded-Proto is believed (ViaHTTPS);
	// from any other peer these headers are ignored. Empty by default:
	// the peer (Request.RemoteAddr) is the client.
	TrustedProxies []netip.Prefix
	// Registry receives the counter readpast_auth_failures_total; nil
	// means no metric.
	Registry *prometheus.Registry
	// Logger receives a warning, naming the client address but never a
	// token, when an address uses up its attempts; nil discards it.
	Logger *slog.Logger
	// Now is the throttle's clock; nil means time.Now. Tests set it to
	// move time without waiting.
	Now func() time.Time
}

// Throttle slows down the guessing of tokens. Each client address (see
// ClientAddr; an IPv6 address counts with its whole /64) has a bucket of
// Burst attempts that refills by one every Every. Credentials that are
// not valid (a wrong bearer token, dashboard login or login cookie) spend
// one; while an address's bucket is empty, its requests that present
// credentials are refused before the credentials are checked, so that no
// answer tells a right token from a wrong one. Valid credentials spend
// nothing: clients with a valid token are never slowed, unless they share
// an address with a guesser. Memory stays bounded (see
// ThrottleConfig.MaxAddresses). A Throttle is safe for concurrent use; the
// API and the dashboard of one server share one (Config.Throttle).
type Throttle struct {
	burst   int
	every   time.Duration
	max     int
	trusted []netip.Prefix
	now     func() time.Time
	log     *slog.Logger

	refused, throttled prometheus.Counter

	// seed keys the hash that gives a network its buckets.
	seed maphash.Seed

	mu        sync.Mutex
	buckets   map[netip.Addr]*bucket // by addrKey; protected by mu
	networks  []*bucket              // networkBucketCount, made as needed; protected by mu
	nextSweep time.Time              // protected by mu
}

// bucket is the attempts of one address, or of the networks that share
// it.
type bucket struct {
	// mu serializes the checks counted against the bucket, from deciding
	// that a request may try to spending its attempt, so that concurrent
	// requests cannot check more credentials than the bucket allows.
	mu  sync.Mutex
	lim *rate.Limiter
	// warned: the log said the bucket's address or network used up its
	// attempts since the bucket was last full. Protected by mu.
	warned bool
	// users counts the requests counted against this address bucket that
	// are not done: it is not forgotten meanwhile. Protected by
	// Throttle.mu.
	users int
}

// NewThrottle returns a throttle for cfg. It fails on a negative setting,
// an Every past MaxThrottleEvery, an invalid proxy prefix, or when the
// metric cannot be registered.
func NewThrottle(cfg ThrottleConfig) (*Throttle, error) {
	if cfg.Burst < 0 || cfg.Every < 0 || cfg.MaxAddresses < 0 {
		return nil, errors.New("httpapi: ThrottleConfig settings must not be negative")
	}
	if cfg.Every > MaxThrottleEvery {
		return nil, fmt.Errorf("httpapi: ThrottleConfig.Every %v is longer than %v", cfg.Every, MaxThrottleEvery)
	}
	t := &Throttle{
		burst: cmp.Or(cfg.Burst, DefaultThrottleBurst),
		every: cmp.Or(cfg.Every, DefaultThrottleEvery),
		max:   cmp.Or(cfg.MaxAddresses, DefaultThrottleMaxAddresses),
		now:   cfg.Now,
		log:   cfg.Logger,
		seed:  maphash.MakeSeed(),

		buckets: map[netip.Addr]*bucket{},
	}
	for _, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, fmt.Errorf("httpapi: invalid prefix %v in ThrottleConfig.TrustedProxies", p)
		}
		t.trusted = append(t.trusted, unmapPrefix(p))
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "readpast_auth_failures_total",
		Help: `Requests whose credentials (bearer token, dashboard login or login cookie) were refused: outcome="refused" when checked and not valid (401), "throttled" when refused unchecked because the client address failed too often (429).`,
	}, []string{"outcome"})
	t.refused = failures.WithLabelValues("refused")
	t.throttled = failures.WithLabelValues("throttled")
	if cfg.Registry != nil {
		if err := cfg.Registry.Register(failures); err != nil {
			return nil, fmt.Errorf("httpapi: register readpast_auth_failures_total: %w", err)
		}
	}
	return t, nil
}

// unmapPrefix returns p masked, as an IPv4 prefix when it is an
// IPv4-mapped IPv6 one (::ffff:10.0.0.0/104 is 10.0.0.0/8), since client
// addresses are compared unmapped.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}

func (t *Throttle) newBucket() *bucket {
	return &bucket{lim: rate.NewLimiter(rate.Every(t.every), t.burst)}
}

// TokenAccess is g.TokenAccess(token) for a token that r presented,
// throttled by r's client address. While the address's failures have
// emptied its bucket it returns NoAccess and how long until the address
// may try again (rounded up to a whole second), without checking the
// token. Otherwise it returns the token's access and a zero wait, and a
// token that allows nothing spends one attempt. While authentication is
// off it returns FullAccess.
func (t *Throttle) TokenAccess(r *http.Request, g *Guard, token string) (Access, time.Duration) {
	if !g.AuthOn() {
		return FullAccess, 0
	}
	c := t.choose(addrKey(t.ClientAddr(r)))
	defer t.done(c)
	c.lock()
	defer c.unlock()
	now := t.now()
	if wait := t.wait(c, now); wait > 0 {
		t.throttled.Inc()
		return NoAccess, wait
	}
	a := g.TokenAccess(token)
	if a == NoAccess {
		t.fail(c, now)
	}
	return a, 0
}

// count is what one request's attempt counts against, chosen once: the
// client address's bucket, or, when the throttle remembers as many
// addresses as it may and the address is not one of them, the two
// buckets of its network.
type count struct {
	key netip.Addr
	own *bucket // the address's; nil when counted by network

	network netip.Prefix
	shared  [2]*bucket // the network's, in lock order
}

// buckets returns the buckets c spends from.
func (c *count) buckets() []*bucket {
	if c.own != nil {
		return []*bucket{c.own}
	}
	return c.shared[:]
}

func (c *count) lock() {
	for _, b := range c.buckets() {
		b.mu.Lock()
	}
}

func (c *count) unlock() {
	for _, b := range c.buckets() {
		b.mu.Unlock()
	}
}

// choose returns what key's attempt counts against: its bucket, made
// (which holds its place in the table) if it has none and there is room,
// else its network's buckets.
func (t *Throttle) choose(key netip.Addr) *count {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[key]
	if b == nil {
		t.sweep(t.now())
		if len(t.buckets) < t.max {
			b = t.newBucket()
			t.buckets[key] = b
		}
	}
	if b != nil {
		b.users++
		return &count{key: key, own: b}
	}
	network := netKey(key)
	i, j := networkBuckets(t.seed, network)
	if t.networks == nil {
		t.networks = make([]*bucket, networkBucketCount)
	}
	for _, n := range []int{i, j} {
		if t.networks[n] == nil {
			t.networks[n] = t.newBucket()
		}
	}
	return &count{key: key, network: network, shared: [2]*bucket{t.networks[i], t.networks[j]}}
}

// done ends c's request: an address bucket that is full again and that no
// other request uses is forgotten.
func (t *Throttle) done(c *count) {
	if c.own == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c.own.users--
	if c.own.users == 0 && t.full(c.own, t.now()) && t.buckets[c.key] == c.own {
		delete(t.buckets, c.key)
	}
}

// sweep forgets the address buckets that are full and unused, at most
// once per Every. The caller holds mu.
func (t *Throttle) sweep(now time.Time) {
	if now.Before(t.nextSweep) {
		return
	}
	for k, b := range t.buckets {
		if b.users == 0 && t.full(b, now) {
			delete(t.buckets, k)
		}
	}
	t.nextSweep = now.Add(t.every)
}

// full reports whether b has all its attempts.
func (t *Throttle) full(b *bucket, now time.Time) bool {
	return b.lim.TokensAt(now) >= float64(t.burst)
}

// tokens returns the attempts c has: its address's, or the larger of its
// network's two buckets'. The caller holds c's locks.
func (t *Throttle) tokens(c *count, now time.Time) float64 {
	if c.own != nil {
		return c.own.lim.TokensAt(now)
	}
	return max(c.shared[0].lim.TokensAt(now), c.shared[1].lim.TokensAt(now))
}

// wait returns how long c must wait before presenting credentials again:
// 0 when it may now. The caller holds c's locks.
func (t *Throttle) wait(c *count, now time.Time) time.Duration {
	tokens := t.tokens(c, now)
	if tokens >= 1 {
		return 0
	}
	// Whole seconds, rounded up, at most MaxThrottleEvery; the nanosecond
	// keeps a float error (1.0000000000000002) from making 1 second 2.
	secs := math.Ceil((1-tokens)*t.every.Seconds() - 1e-9)
	return time.Duration(min(max(1, secs), MaxThrottleEvery.Seconds())) * time.Second
}

// fail spends one of c's attempts (from both of a network's buckets), and
// logs a warning when that leaves none. The caller holds c's locks.
func (t *Throttle) fail(c *count, now time.Time) {
	bs := c.buckets()
	for _, b := range bs {
		if t.full(b, now) {
			b.warned = false // all its attempts came back
		}
		b.lim.AllowN(now, 1)
	}
	t.refused.Inc()
	if t.tokens(c, now) >= 1 {
		return
	}
	warn := false
	for _, b := range bs {
		warn = warn || !b.warned
		b.warned = true
	}
	if !warn {
		return
	}
	client := slog.String("client", c.key.String())
	if c.own == nil {
		client = slog.String("client_network", c.network.String())
	}
	t.log.Warn("too many failed authentication attempts: refusing credentials from this client address for a while",
		client, slog.Int("attempts", t.burst), slog.Duration("one_more_every", t.every))
}

// addrKey is the bucket of address a: a itself, or its /64 for IPv6.
func addrKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		return netip.PrefixFrom(a, 64).Masked().Addr()
	}
	return a
}

// netKey is the network of address a, by which its attempts count once
// the throttle remembers as many addresses as it may: its /24 for IPv4,
// its /48 for IPv6.
func netKey(a netip.Addr) netip.Prefix {
	bits := 24
	if a.Is6() {
		bits = 48
	}
	p, _ := a.Prefix(bits) // the zero Prefix for the zero Addr
	return p
}

// networkBuckets returns the two buckets of network, a pair of distinct
// indexes into Throttle.networks in increasing order, by a hash keyed
// with seed.
func networkBuckets(seed maphash.Seed, network netip.Prefix) (int, int) {
	const n = networkBucketCount
	h := maphash.Comparable(seed, network)
	i, j := int(h%n), int(h/n%(n-1))
	if j >= i {
		j++
	}
	return min(i, j), max(i, j)
}
