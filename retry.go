package readpast

import (
	"math/rand/v2"
	"time"
)

// RetryPolicy returns how long to wait before the next attempt, given the
// attempt that just failed (1-based). A negative wait is taken as none.
type RetryPolicy func(attempt int) time.Duration

// DefaultRetryPolicy waits 2^(attempt-1) seconds, capped at one hour, with
// ±20% jitter so a burst of failures does not retry in lockstep.
func DefaultRetryPolicy(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	base := time.Hour
	if attempt <= 12 {
		base = min(time.Duration(1<<(attempt-1))*time.Second, time.Hour)
	}
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(base) * jitter)
}
