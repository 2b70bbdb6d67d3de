package storekit

import (
	"testing"
	"time"
)

// TestBucket: a bucket of burst 3 at one start per second gives 3 at
// once, then one a second; a refused take changes nothing and says when
// it could be granted; a bucket without a rate grants everything.
func TestBucket(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := Bucket{Interval: time.Second, Burst: 3}
	if n := b.Tokens(t0); n != 3 {
		t.Fatalf("a new bucket has %d tokens, want 3", n)
	}
	if ok, _ := b.Take(t0, 3); !ok {
		t.Fatal("the burst was refused")
	}
	if n, next := b.Tokens(t0), b.NextStart(t0); n != 0 || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("after the burst: %d tokens, next start %s", n, next)
	}
	ok, at := b.Take(t0.Add(500*time.Millisecond), 1)
	if ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("take at 0.5 s = %v, %s; want refused until 1 s", ok, at)
	}
	if ok, _ := b.Take(t0.Add(time.Second), 1); !ok {
		t.Fatal("take at 1 s was refused")
	}
	if ok, at := b.Take(t0.Add(time.Second), 2); ok || !at.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("take of 2 at 1 s = %v, %s; want refused until 3 s", ok, at)
	}
	// After a quiet spell the bucket is full again, never fuller.
	if n := b.Tokens(t0.Add(time.Hour)); n != 3 {
		t.Fatalf("after an hour: %d tokens, want 3", n)
	}
	// Over any span, at most span/interval + burst starts: take greedily
	// every 100 ms for 10 s.
	b = Bucket{Interval: time.Second, Burst: 3}
	starts := 0
	for at := t0; at.Before(t0.Add(10 * time.Second)); at = at.Add(100 * time.Millisecond) {
		if ok, _ := b.Take(at, 1); ok {
			starts++
		}
	}
	if starts != 3+9 { // 3 at 0 s, then one at each of 1 s ... 9 s (10 s is past the span)
		t.Fatalf("%d starts in 10 s at 1/s with a burst of 3, want 12", starts)
	}
	none := Bucket{}
	if ok, _ := none.Take(t0, 1000); !ok || none.Tokens(t0) != -1 || !none.NextStart(t0).IsZero() {
		t.Fatal("a bucket without a rate limits something")
	}
}

// TestBucketOfAMillionADay: a burst of a million at one start a day spans
// 8.64e16 µs, past what nanoseconds hold: the bucket is full, not empty.
func TestBucketOfAMillionADay(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := Bucket{Interval: 24 * time.Hour, Burst: 1_000_000}
	if n := b.Tokens(now); n != 1_000_000 {
		t.Fatalf("tokens %d, want a million", n)
	}
	if ok, _ := b.Take(now, 999_999); !ok {
		t.Fatal("refused")
	}
	if ok, at := b.Take(now, 2); ok || !at.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("take 2 of the 1 left = %v, %s; want refused until a day later", ok, at)
	}
}
