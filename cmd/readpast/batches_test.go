package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
	"github.com/readpast/readpast/internal/pgtest"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// TestBatchesCLI: `batches open|add|seal|show` on a database (SQLite and
// PostgreSQL) and through a server: members join in two calls (flags,
// then JSON lines), the seal releases the finishing job once they have
// ended, a sealed batch refuses more, and bad input enqueues nothing.
func TestBatchesCLI(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "batches.db")
	lite, err := sqlite.Open(ctx, db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	h, err := httpapi.New(httpapi.Config{Store: lite})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	pgURL := pgtest.URL(t)
	pg, err := postgres.Open(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if err := pg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	cli := func(stdin string, wantCode int, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		err := batchesFrom(ctx, strings.NewReader(stdin), args, &out)
		code := 0
		if err != nil {
			code = 1
			var ue usageError
			if errors.As(err, &ue) {
				code = 2
			}
			out.WriteString(err.Error())
		}
		if code != wantCode {
			t.Fatalf("readpast batches %v: exit %d, want %d: %s", args, code, wantCode, out.String())
		}
		return out.String()
	}
	for _, tc := range []struct {
		name   string
		store  readpast.Store
		target []string
	}{
		{"sqlite", lite, []string{"--database-url", db}},
		{"remote", lite, []string{"--url", srv.URL}},
		{"postgres", pg, []string{"--database-url", pgURL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := "batch-" + tc.name
			with := func(args ...string) []string { return append(args, tc.target...) }
			var b httpapi.Batch
			if err := json.Unmarshal([]byte(cli("", 0, with("open", "--kind", "notify", "--queue", q, "--json")...)), &b); err != nil {
				t.Fatal(err)
			}
			if b.ID == 0 || b.Finisher.State != readpast.StateBlocked || b.Sealed {
				t.Fatalf("opened %+v", b)
			}
			id := jsonID(b.ID)
			if out := cli("", 0, with("add", id, "--kind", "thumb", "--queue", q)...); !strings.Contains(out, "thumb") {
				t.Fatalf("add printed %q", out)
			}
			lines := `{"kind":"thumb","queue":"` + q + `"}` + "\n" + `{"kind":"thumb","queue":"` + q + `","payload":{"f":2}}` + "\n"
			cli(lines, 0, with("add", id, "--stdin")...)
			cli(`{"kind":"thumb"}`+"\n"+`{"queue":"nokind"}`, 2, with("add", id, "--stdin")...)
			cli("", 2, with("add", id)...)
			cli("", 2, with("add", "nope", "--kind", "k")...)
			if out := cli("", 0, with("show", id)...); !strings.Contains(out, "members: 3 (live 3") || !strings.Contains(out, "open") {
				t.Fatalf("show printed %q", out)
			}
			jobs, err := tc.store.Claim(ctx, readpast.ClaimParams{Queues: []string{q}, Limit: 10, Lease: time.Minute, Worker: "w"})
			if err != nil || len(jobs) != 3 {
				t.Fatalf("claimed %d, %v; want the 3 members", len(jobs), err)
			}
			for _, j := range jobs {
				if _, err := tc.store.Complete(ctx, []readpast.Completion{{ID: j.ID, Token: j.Token}}); err != nil {
					t.Fatal(err)
				}
			}
			if out := cli("", 0, with("seal", id)...); !strings.Contains(out, "sealed") || !strings.Contains(out, "is pending") || !strings.Contains(out, "succeeded 3") {
				t.Fatalf("seal printed %q", out)
			}
			if out := cli("", 1, with("add", id, "--kind", "late", "--queue", q)...); !strings.Contains(out, "sealed") {
				t.Fatalf("add after the seal printed %q", out)
			}
			cli("", 1, with("show", "999999")...)
			l, err := tc.store.List(ctx, readpast.ListParams{Queue: q})
			if err != nil || len(l.Jobs) != 4 {
				t.Fatalf("the batch's queue holds %d jobs, %v; want the finishing job and 3 members", len(l.Jobs), err)
			}
		})
	}
}

// jsonID formats an id as the CLI takes it.
func jsonID(id int64) string {
	b, _ := json.Marshal(id)
	return string(b)
}
