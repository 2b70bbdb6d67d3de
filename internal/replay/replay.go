// Package replay holds helpers for deterministic replays of concurrency
// windows in tests.
package replay

import (
	"fmt"
	"testing"
)

// Tries is how many times Windowed runs a replay whose window did not
// open before it fails.
const Tries = 3

// Windowed runs body, a replay that skips when the window it replays did
// not open (the machine too slow to reach it before the deadline it
// races), in subtests "try 1" to "try 3", and fails when it never opened:
// a replay that did not replay is not a pass.
func Windowed(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	for try := 1; try <= Tries; try++ {
		var sub *testing.T
		t.Run(fmt.Sprintf("try %d", try), func(t *testing.T) {
			sub = t
			body(t)
		})
		if !sub.Skipped() {
			return
		}
	}
	t.Fatalf("the window never opened in %d tries", Tries)
}

// Run runs body as subtest name of t, Windowed.
func Run(t *testing.T, name string, body func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) { Windowed(t, body) })
}
