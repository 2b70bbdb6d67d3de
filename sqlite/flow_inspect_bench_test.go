package sqlite_test

import (
	"testing"

	"github.com/readpast/readpast/storetest"
)

// BenchmarkFlowInspect: storetest.BenchFlowInspect.
//
//	go test -run '^$' -bench FlowInspect -benchtime 20x ./sqlite/
func BenchmarkFlowInspect(b *testing.B) { storetest.BenchFlowInspect(b, openTemp(b)) }
