package faults_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast/internal/pgtest"
)

// newDatabase creates an empty database on srv and returns its name.
func newDatabase(t testing.TB, srv *pgtest.Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := srv.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(p.Path, "/")
}
