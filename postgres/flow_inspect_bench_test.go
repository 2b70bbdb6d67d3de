package postgres_test

import (
	"testing"

	"github.com/readpast/readpast/storetest"
)

// BenchmarkFlowInspect: storetest.BenchFlowInspect.
//
//	go test -run '^$' -bench FlowInspect -benchtime 20x ./postgres/
func BenchmarkFlowInspect(b *testing.B) { storetest.BenchFlowInspect(b, newStore(b)) }
