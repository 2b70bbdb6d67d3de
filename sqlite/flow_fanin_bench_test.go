package sqlite_test

import (
	"testing"

	"github.com/readpast/readpast/storetest"
)

// BenchmarkFlowFanIn: storetest.BenchFlowFanIn.
//
//	go test -run '^$' -bench FlowFanIn -benchtime 100x ./sqlite/
func BenchmarkFlowFanIn(b *testing.B) { storetest.BenchFlowFanIn(b, openTemp(b)) }

// BenchmarkFlowPrune: storetest.BenchFlowPrune.
//
//	go test -run '^$' -bench FlowPrune -benchtime 3x ./sqlite/
func BenchmarkFlowPrune(b *testing.B) { storetest.BenchFlowPrune(b, openTemp(b)) }
