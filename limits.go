package readpast

import (
	"strings"
	"time"
)

// A Limit bounds how the jobs of a key start: how many may run at once
// (Concurrency) and how often one may start (Rate per Per, with up to
// Burst at once). A job names its key with EnqueueParams.Group; a claim
// takes a job only when its key allows it, and passes the key over
// otherwise, without waiting and without reading its jobs.
//
// Key is either a key ("api:stripe") or a template: a prefix followed by
// "*" ("customer:*"), which gives each key it matches a limit of its own
// (customer:42 and customer:43 each run 5 at once). A key's limit is the
// one declared for the key itself, or else that of the longest template
// it matches; a key no limit matches runs one job at a time, the
// concurrency group default. A limit that sets nothing but its key lets
// the keys it governs run any number of jobs at once, taking turns.
//
// A key without a concurrency bound (Concurrency 0) is never full, so its
// completions give its slots back without writing its row, and claims
// never pass it over for them; a key with a bound, however high, has its
// slots given back on its row (docs/design/flow-control.md).
//
// The rate is a generic cell rate algorithm on the database's clock:
// starts are the claims of attempts (a retry or a snoozed job's next run
// is another start), none is ever refunded, and over any span of time T
// a key starts at most Rate*T/Per + Burst jobs. Changing a limit applies
// to the starts that follow and preempts nothing.
type Limit struct {
	// Key is the key or template ("prefix*") the limit applies to.
	Key string `json:"key"`
	// Concurrency is how many of a key's jobs may run at once; 0 means
	// no bound.
	Concurrency int `json:"concurrency"`
	// Rate is how many of a key's jobs may start per Per; 0 means no
	// rate limit.
	Rate int `json:"rate,omitempty"`
	// Per is the period of Rate; 0 means one second. It is kept in whole
	// microseconds, the stores' unit: Normalize rounds it up.
	Per time.Duration `json:"per,omitempty"`
	// Burst is how many starts may happen at once after a quiet spell; 0
	// means Rate (a full period's worth), at most MaxBurst.
	Burst int `json:"burst,omitempty"`
	// Weight is a key's share among the keys that take turns within a
	// priority: the key starts up to Weight jobs per turn, in one claim
	// (which takes a job of every key it reads, then a second, ...) or
	// over several, so keys with backlogs start jobs in proportion to
	// their weights; claims running at once bend the shares somewhat
	// (docs/design/flow-control.md). 0 means 1.
	Weight int `json:"weight,omitempty"`
}

// Bounds of a Limit.
const (
	// MaxConcurrency caps Limit.Concurrency.
	MaxConcurrency = 10000
	// MinRateInterval is the shortest time a rate may ask between two
	// starts (Per/Rate): a million starts a second.
	MinRateInterval = time.Microsecond
	// MaxPer caps Limit.Per.
	MaxPer = 24 * time.Hour
	// MaxBurst caps Limit.Burst.
	MaxBurst = 1_000_000
	// MaxWeight caps Limit.Weight.
	MaxWeight = 100
)

// Template reports whether the limit is a template ("prefix*").
func (l Limit) Template() bool { return strings.HasSuffix(l.Key, "*") }

// Interval is the time between two starts the rate allows (Per/Rate,
// rounded up to a whole microsecond, the stores' unit: never faster than
// declared), 0 without a rate.
func (l Limit) Interval() time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	us := (l.Per.Nanoseconds() + int64(l.Rate)*1000 - 1) / (int64(l.Rate) * 1000)
	return time.Duration(us) * time.Microsecond
}

// Normalize fills defaults into l and checks every field.
func (l Limit) Normalize() (Limit, error) {
	if err := CheckLimitKey(l.Key); err != nil {
		return l, err
	}
	if l.Concurrency < 0 || l.Concurrency > MaxConcurrency {
		return l, invalid("concurrency", "must be between 0 (no bound) and %d", MaxConcurrency)
	}
	if l.Weight < 0 || l.Weight > MaxWeight {
		return l, invalid("weight", "must be between 1 and %d (0: 1)", MaxWeight)
	}
	l.Weight = max(l.Weight, 1)
	if l.Rate < 0 {
		return l, invalid("rate", "must not be negative")
	}
	if l.Rate == 0 {
		if l.Per != 0 || l.Burst != 0 {
			return l, invalid("rate", "is required with per or burst")
		}
		return l, nil
	}
	if l.Per == 0 {
		l.Per = time.Second
	}
	if l.Per < 0 || l.Per > MaxPer {
		return l, invalid("per", "must be between 1µs and %s", MaxPer)
	}
	if l.Per.Nanoseconds() < int64(l.Rate)*MinRateInterval.Nanoseconds() { // Per/Rate as declared, under MinRateInterval
		return l, invalid("rate", "allows more than one start a microsecond (per/rate must be at least 1µs)")
	}
	if r := l.Per % time.Microsecond; r != 0 {
		l.Per += time.Microsecond - r // never faster than declared
	}
	if l.Burst == 0 {
		l.Burst = min(l.Rate, MaxBurst)
	}
	if l.Burst < 1 || l.Burst > MaxBurst {
		return l, invalid("burst", "must be between 1 and %d", MaxBurst)
	}
	return l, nil
}

// CheckLimitKey reports whether key names a key or a template: a usable
// group name, where "*" may only come last.
func CheckLimitKey(key string) error {
	if err := checkName("key", key, true); err != nil {
		return err
	}
	if i := strings.IndexByte(key, '*'); i >= 0 && i != len(key)-1 {
		return invalid("key", "may hold \"*\" only at its end (a template)")
	}
	return nil
}

// CheckKey reports whether key is a usable key (a group name).
func CheckKey(key string) error { return checkName("key", key, true) }

// MatchLimit returns the limit among limits that applies to key: the one
// declared for key itself, or else the longest template key matches; ok
// is false when none does.
func MatchLimit(limits []Limit, key string) (l Limit, ok bool) {
	best := -1
	for _, c := range limits {
		if c.Key == key {
			return c, true
		}
		if p, t := strings.CutSuffix(c.Key, "*"); t && strings.HasPrefix(key, p) && len(p) > best {
			l, ok, best = c, true, len(p)
		}
	}
	return l, ok
}

// KeyState is one key's bucket as a claim would see it now.
type KeyState struct {
	Key string `json:"key"`
	// Limit is the key the applying limit was declared for (the key
	// itself or a template); empty for the default (one at a time).
	Limit string `json:"limit,omitempty"`
	// Running counts the key's jobs held by workers; Concurrency is its
	// bound (0: none).
	Running     int `json:"running"`
	Concurrency int `json:"concurrency"`
	// Tokens is how many starts the rate allows now; -1 without a rate.
	Tokens int `json:"tokens"`
	// NextStart is when the rate next allows a start: zero when it does
	// now or there is no rate.
	NextStart time.Time `json:"next_start,omitzero"`
}

// LimitInfo is a declared limit with the keys it applies to that have a
// bucket (keys that ran or were limited lately).
type LimitInfo struct {
	Limit
	// Keys are up to MaxLimitKeys of those keys' states, by key.
	Keys []KeyState `json:"keys"`
}

// MaxLimitKeys caps LimitInfo.Keys.
const MaxLimitKeys = 100

// TokenGrant is the answer to Store.TakeTokens.
type TokenGrant struct {
	// Granted says whether the tokens were taken.
	Granted bool `json:"granted"`
	// RetryAt is, when they were not, the earliest time they could be.
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// MaxTakeTokens caps the n of Store.TakeTokens.
const MaxTakeTokens = MaxBurst

// CheckTake reports whether Store.TakeTokens may take n starts of key: a
// key, not a template (tokens are taken from one key's bucket).
func CheckTake(key string, n int) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if strings.HasSuffix(key, "*") {
		return invalid("key", "%q is a template: take tokens of one of the keys it matches", key)
	}
	if n < 1 || n > MaxTakeTokens {
		return invalid("n", "must be between 1 and %d", MaxTakeTokens)
	}
	return nil
}
