package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// BenchmarkFlowPage measures the flow page (the store's FlowGraph, the
// layout and the SVG) and a job's page with its relatives, on a flow of
// readpast.MaxFlowJobs jobs in 10 layers of 100, each job after two of
// the layer above: the flow page draws flowCap of them and says the rest
// are cut. The middle job's pages are asked for; "graph" is the store's
// FlowGraph alone.
//
//	go test -run '^$' -bench FlowPage -benchtime 20x ./dashboard/
func BenchmarkFlowPage(b *testing.B) {
	ctx := context.Background()
	stores := map[string]func(*testing.B) readpast.Store{
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
			st := stores[name](b)
			defer st.Close()
			const layers, width = 10, 100
			var flow []readpast.FlowJob
			for l := range layers {
				for i := range width {
					fj := readpast.FlowJob{Ref: fmt.Sprintf("l%d-%d", l, i), Job: readpast.EnqueueParams{Kind: "step", Queue: "bench"}}
					if l > 0 {
						fj.After = []readpast.After{{Ref: fmt.Sprintf("l%d-%d", l-1, i)}, {Ref: fmt.Sprintf("l%d-%d", l-1, (i+1)%width)}}
					}
					flow = append(flow, fj)
				}
			}
			jobs, err := st.(readpast.FlowStore).EnqueueFlow(ctx, flow)
			if err != nil {
				b.Fatal(err)
			}
			h, err := New(Config{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close()
			mid := jobs[len(jobs)/2].ID
			// The store's part alone, to tell it from the page's.
			b.Run("graph", func(b *testing.B) {
				for b.Loop() {
					g, err := st.(readpast.FlowInspector).FlowGraph(ctx, mid, flowCap)
					if err != nil || len(g.Jobs) != flowCap || !g.Truncated {
						b.Fatalf("FlowGraph: %d jobs, truncated %v, %v", len(g.Jobs), g.Truncated, err)
					}
				}
			})
			for _, page := range [][2]string{{"flow", fmt.Sprintf("/jobs/%d/flow", mid)}, {"job", fmt.Sprintf("/jobs/%d", mid)}} {
				path := page[1]
				b.Run(page[0], func(b *testing.B) {
					for b.Loop() {
						r := httptest.NewRequest(http.MethodGet, path, nil)
						r.Host = "localhost"
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						if w.Code != http.StatusOK {
							b.Fatalf("%s: %d\n%s", path, w.Code, w.Body.String())
						}
					}
				})
			}
		})
	}
}
