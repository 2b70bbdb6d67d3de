package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/sqlite"
)

// skippingStore is a store whose bulk cancel skips jobs 7 and 9, as one
// does when other transactions hold their rows past its bound.
type skippingStore struct{ readpast.Store }

func (skippingStore) BulkCancel(ctx context.Context, f readpast.JobFilter) (int, error) {
	return 2, &readpast.SkippedError{Action: readpast.BulkCancelAction, IDs: []int64{7, 9}}
}

// TestBulkSkippedCLI: `jobs bulk` through a server whose bulk cancel
// skipped jobs prints what it did, names the skipped jobs and exits 1,
// with --json too.
func TestBulkSkippedCLI(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "bulk.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := httpapi.New(httpapi.Config{Store: skippingStore{st}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, extra := range [][]string{nil, {"--json"}} {
		var out, errOut bytes.Buffer
		args := append([]string{"jobs", "bulk", "cancel", "--queue", "q", "--url", srv.URL}, extra...)
		code := run(ctx, args, &out, &errOut)
		if code != 1 {
			t.Fatalf("readpast %v: exit %d, want 1: %s%s", args, code, out.String(), errOut.String())
		}
		if want := "cancelled 2 jobs\n"; extra == nil && out.String() != want {
			t.Errorf("readpast %v printed %q, want %q", args, out.String(), want)
		}
		if extra != nil && !strings.Contains(strings.Join(strings.Fields(out.String()), ""), `"skipped":[7,9]`) {
			t.Errorf("readpast %v printed %q, want the skipped ids", args, out.String())
		}
		if !strings.Contains(errOut.String(), "skipped 2 jobs") || !strings.Contains(errOut.String(), "[7 9]") {
			t.Errorf("readpast %v said %q on stderr, want the skipped jobs named", args, errOut.String())
		}
	}
}
