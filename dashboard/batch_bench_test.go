package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// BenchmarkBatchPage measures the page of a batch's finishing job with
// 10,000 members (its Batch panel and its first relativesShown parents),
// "batch" the store's Batch read alone, and "lone" the page of a job
// outside batches, for comparison.
//
//	go test -run '^$' -bench BatchPage -benchtime 20x ./dashboard/
func BenchmarkBatchPage(b *testing.B) {
	ctx := context.Background()
	open := map[string]func(*testing.B) readpast.Store{
		"sqlite": func(b *testing.B) readpast.Store {
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			return st
		},
		"postgres": func(b *testing.B) readpast.Store {
			st, err := postgres.Open(ctx, pgtest.URL(b))
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			return st
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			st := open[name](b)
			defer st.Close()
			bs := st.(readpast.BatchStore)
			p, err := readpast.BatchParams{Finisher: readpast.EnqueueParams{Kind: "notify", Queue: "bench"}}.Normalize(time.Now())
			if err != nil {
				b.Fatal(err)
			}
			fin, err := bs.OpenBatch(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			const members = 10_000
			for range members / readpast.MaxBatchJoin {
				ps := make([]readpast.EnqueueParams, readpast.MaxBatchJoin)
				for i := range ps {
					ps[i] = readpast.EnqueueParams{Kind: "thumbnail", Queue: "bench-m"}
				}
				if ps, err = readpast.NormalizeBatchJobs(ps, time.Now()); err != nil {
					b.Fatal(err)
				}
				if _, err := bs.AddToBatch(ctx, fin.ID, ps); err != nil {
					b.Fatal(err)
				}
			}
			lone, err := st.Enqueue(ctx, []readpast.EnqueueParams{{Kind: "lone", Queue: "bench"}})
			if err != nil {
				b.Fatal(err)
			}
			h, err := New(Config{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			b.Run("batch", func(b *testing.B) {
				for b.Loop() {
					if bt, err := bs.Batch(ctx, fin.ID); err != nil || bt.Members != members {
						b.Fatalf("Batch: %d members, %v", bt.Members, err)
					}
				}
			})
			for _, page := range []struct{ name, path, want string }{
				{"job", fmt.Sprintf("/jobs/%d", fin.ID), `id="batch"`},
				{"lone", fmt.Sprintf("/jobs/%d", lone[0].ID), "<h1>Job"},
			} {
				b.Run(page.name, func(b *testing.B) {
					for b.Loop() {
						r := httptest.NewRequest(http.MethodGet, page.path, nil)
						r.Host = "localhost"
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), page.want) {
							b.Fatalf("%s: %d\n%s", page.path, w.Code, w.Body.String())
						}
					}
				})
			}
		})
	}
}
