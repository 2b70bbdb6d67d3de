package replay_test

import (
	"testing"

	"github.com/readpast/readpast/internal/replay"
)

func TestWindowedRetriesASkippedReplay(t *testing.T) {
	n := 0
	replay.Windowed(t, func(t *testing.T) {
		n++
		if n < replay.Tries {
			t.Skip("no window")
		}
	})
	if n != replay.Tries {
		t.Fatalf("ran %d times, want %d", n, replay.Tries)
	}
}

func TestWindowedStopsAtTheFirstRunThatOpens(t *testing.T) {
	n := 0
	replay.Windowed(t, func(t *testing.T) { n++ })
	if n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}
