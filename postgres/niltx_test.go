package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/readpast/readpast"
)

// TestNilTransactions: every call inside the caller's transaction refuses
// a nil one with an error naming the call, as SQLite's do, rather than
// panicking.
func TestNilTransactions(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	jobs := []readpast.EnqueueParams{{Kind: "k"}}
	flow := []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "k"}}}
	done := readpast.Completion{ID: 1, Token: "00000000-0000-0000-0000-000000000000"}
	for name, call := range map[string]func() error{
		"EnqueueTx":        func() error { _, err := s.EnqueueTx(ctx, nil, jobs); return err },
		"EnqueueSQLTx":     func() error { _, err := s.EnqueueSQLTx(ctx, nil, jobs); return err },
		"CompleteTx":       func() error { return s.CompleteTx(ctx, nil, done) },
		"CompleteSQLTx":    func() error { return s.CompleteSQLTx(ctx, nil, done) },
		"EnqueueFlowTx":    func() error { _, err := s.EnqueueFlowTx(ctx, nil, flow); return err },
		"EnqueueFlowSQLTx": func() error { _, err := s.EnqueueFlowSQLTx(ctx, nil, flow); return err },
		"AddToBatchTx":     func() error { _, err := s.AddToBatchTx(ctx, nil, 1, jobs); return err },
		"AddToBatchSQLTx":  func() error { _, err := s.AddToBatchSQLTx(ctx, nil, 1, jobs); return err },
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s with a nil transaction panicked: %v", name, p)
				}
			}()
			if err := call(); err == nil || !strings.Contains(err.Error(), name+": nil transaction") {
				t.Errorf("%s with a nil transaction: %v, want an error naming it", name, err)
			}
		}()
	}
}
