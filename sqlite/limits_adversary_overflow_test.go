package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// (A second reviewer's tests; sqlite/limits_adversary_test.go may hold another's.)

// TestAdversaryHugeBurstNeverStarts: Limit.Normalize accepts a rate of 1
// per 24h with a burst of 1,000,000 (Per <= MaxPer, Burst <= MaxBurst).
// SQLite keeps buckets in Go (storekit.Bucket), where Burst*Interval is
// 8.64e19 ns and overflows time.Duration: Tokens of a full bucket is 0,
// NextStart and Take's retry time are 184 years ahead. A key with a full
// bucket of a million starts never starts a job, and TakeTokens(1) is
// refused. PostgreSQL computes the same bucket in SQL microseconds and
// starts the job.
func TestAdversaryHugeBurstNeverStarts(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for _, key := range []string{"daily", "tokens"} {
		if _, err := s.PutLimit(ctx, readpast.Limit{Key: key, Rate: 1, Per: 24 * time.Hour, Burst: 1_000_000}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "k", Group: "daily"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Claim(ctx, readpast.ClaimParams{Worker: "w", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.TakeTokens(ctx, "tokens", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Errorf("claimed %d jobs of a key with a full bucket (burst 1,000,000, rate 1/24h), want 1", len(got))
	}
	if !g.Granted {
		t.Errorf("TakeTokens(1) from a full bucket of 1,000,000 refused, retry at %v", g.RetryAt)
	}
}
