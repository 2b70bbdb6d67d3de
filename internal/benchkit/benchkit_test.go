package benchkit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScenariosRun runs every scenario at a tiny scale on SQLite, so that
// `readpast bench` and the bench module cannot rot unnoticed, and checks
// each measured something.
func TestScenariosRun(t *testing.T) {
	ctx := context.Background()
	sys, err := ReadpastSQLite(ctx, filepath.Join(t.TempDir(), "bench.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	// Timed scenarios run 3 s: in one second, 1,000 workers starting on a
	// machine that runs other packages' tests too have finished nothing.
	results, err := Run(ctx, []System{sys}, Scenarios, 1, Options{Scale: 0.002, Shortest: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Result{}
	for _, r := range results {
		got[r.Scenario] = r
	}
	for _, r := range results {
		switch {
		case strings.HasPrefix(r.Scenario, "depth"):
			if r.Extra["depth_ms"] <= 0 {
				t.Errorf("%s: no depth cost measured: %+v", r.Scenario, r)
			}
		case r.Jobs <= 0 || r.PerSec <= 0:
			t.Errorf("%s: nothing measured: %+v", r.Scenario, r)
		}
	}
	// SQLite holds no snapshot: that one scenario is left out, nothing else.
	if len(results) != len(Scenarios)-1 {
		t.Errorf("%d results of %d scenarios", len(results), len(Scenarios))
	}
	if _, err := Paced(ctx, sys, Options{Scale: 0.002}, 100, 10, true); !errors.Is(err, ErrNotApplicable) {
		t.Errorf("a held snapshot on SQLite: %v", err)
	}
	if r := got["one job per enqueue"]; r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
		t.Errorf("latencies not measured: %+v", r)
	}
	if _, err := Select("drain-100,nope"); err == nil {
		t.Error("an unknown scenario was accepted")
	}
}

func TestInTurn(t *testing.T) {
	in := []int{1, 2}
	if got := fmt.Sprint(inTurn(in, 0), inTurn(in, 1), inTurn(in, 2), in); got != "[1 2] [2 1] [1 2] [1 2]" {
		t.Errorf("rounds 0, 1, 2 and the input after: %s", got)
	}
}
