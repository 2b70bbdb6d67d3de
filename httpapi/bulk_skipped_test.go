package httpapi

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/sqlite"
)

// skippingStore is a store whose bulk cancel skips jobs 7 and 9, as one
// does when other transactions hold their rows past its bound.
type skippingStore struct{ readpast.Store }

func (skippingStore) BulkCancel(ctx context.Context, f readpast.JobFilter) (int, error) {
	return 2, &readpast.SkippedError{Action: readpast.BulkCancelAction, IDs: []int64{7, 9}}
}

// TestBulkSkipped: a bulk action that skipped jobs answers 200 with what it
// did and the skipped ids; one that skipped none answers "skipped": [].
func TestBulkSkipped(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "readpast.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	e := newEnvOn(t, skippingStore{store}, nil)
	var br BulkResponse
	e.must("POST", "/v1/bulk/cancel", `{"queue":"q"}`, 200, &br)
	if br.Count != 2 || !slices.Equal(br.Skipped, []int64{7, 9}) {
		t.Fatalf("bulk cancel that skipped 7 and 9 answered %+v", br)
	}
	br = BulkResponse{}
	e.must("POST", "/v1/bulk/delete", `{"queue":"q"}`, 200, &br)
	if br.Count != 0 || br.Skipped == nil || len(br.Skipped) != 0 {
		t.Fatalf("bulk delete that skipped nothing answered %+v; want skipped [] (not null)", br)
	}
}
