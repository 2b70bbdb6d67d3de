package storekit

import (
	"time"

	"github.com/readpast/readpast"
)

// A Bucket is a key's rate as its row stores it: the time between two
// starts (Interval, 0 for no rate), how many may start at once (Burst),
// and the theoretical arrival time (TAT: when the last start taken would
// have come had starts come exactly at the rate; zero or past means a
// full bucket). It is a generic cell rate algorithm: no refill job, one
// timestamp a key.
type Bucket struct {
	Interval time.Duration
	Burst    int
	TAT      time.Time
}

// The arithmetic is in microseconds, as the PostgreSQL claim's: a burst
// of a million starts a day apart spans 8.64e16 µs, past what a
// time.Duration (nanoseconds) holds.

// us returns the interval and the bucket's base (when its next start
// would come at the rate: TAT, or now if that is later) in microseconds,
// and now in Unix microseconds.
func (b Bucket) us(now time.Time) (iv, base, nowUS int64) {
	iv, nowUS = b.Interval.Microseconds(), now.UnixMicro()
	base = nowUS
	if !b.TAT.IsZero() {
		base = max(base, b.TAT.UnixMicro())
	}
	return iv, base, nowUS
}

// Tokens is how many starts the bucket allows at now (-1 without a rate).
func (b Bucket) Tokens(now time.Time) int {
	iv, base, nowUS := b.us(now)
	if iv <= 0 {
		return -1
	}
	room := int64(b.Burst)*iv - (base - nowUS)
	if room < 0 {
		return 0
	}
	return int(room / iv)
}

// NextStart is when the bucket next allows a start: zero when it does at
// now or has no rate.
func (b Bucket) NextStart(now time.Time) time.Time {
	iv, base, _ := b.us(now)
	if iv <= 0 || b.Tokens(now) > 0 {
		return time.Time{}
	}
	return time.UnixMicro(base - int64(b.Burst-1)*iv)
}

// Take takes n starts at now when the bucket has them, and reports
// whether it did; when it did not, at is the earliest time it could.
func (b *Bucket) Take(now time.Time, n int) (ok bool, at time.Time) {
	iv, base, nowUS := b.us(now)
	if iv <= 0 {
		return true, time.Time{}
	}
	if atUS := base + int64(n-b.Burst)*iv; atUS > nowUS {
		return false, time.UnixMicro(atUS)
	}
	b.TAT = time.UnixMicro(base + int64(n)*iv)
	return true, time.Time{}
}

// KeyState is a key's state from its row's columns at now.
func KeyState(now time.Time, key, limitKey string, running, maxRunning int, b Bucket) readpast.KeyState {
	s := readpast.KeyState{Key: key, Limit: limitKey, Running: running, Concurrency: maxRunning,
		Tokens: b.Tokens(now), NextStart: b.NextStart(now)}
	if maxRunning >= UnboundedRunning {
		s.Concurrency = 0
	}
	return s
}

// UnboundedRunning is the max_running a key's row stores for a limit of
// concurrency 0 (no bound).
const UnboundedRunning = 2147483647

// MaxRunning is the max_running a key's row stores for concurrency c.
func MaxRunning(c int) int {
	if c == 0 {
		return UnboundedRunning
	}
	return c
}

// Rescaled returns the bucket's TAT for a new interval: the starts it
// still counts (TAT past now) take as long at the new interval as they
// took at the old one in starts, rounded up, so a raised rate applies at
// once and a lowered one holds back as many starts as before.
func (b Bucket) Rescaled(now time.Time, interval time.Duration) time.Time {
	old, tat, nowUS := b.Interval.Microseconds(), b.TAT.UnixMicro(), now.UnixMicro()
	iv := interval.Microseconds()
	if old <= 0 || iv <= 0 || iv == old || b.TAT.IsZero() || tat <= nowUS {
		return b.TAT
	}
	debt := tat - nowUS
	return time.UnixMicro(nowUS + (debt*iv+old-1)/old)
}
