package readpast_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/readpast/readpast"
)

// TestNormalizeFlowRefuses: every malformed flow is refused with a
// *FieldError naming the job and field, and never "matched nothing, so
// satisfied".
func TestNormalizeFlowRefuses(t *testing.T) {
	j := func(ref string, after ...readpast.After) readpast.FlowJob {
		return readpast.FlowJob{Ref: ref, Job: readpast.EnqueueParams{Kind: "k"}, After: after}
	}
	chain := make([]readpast.FlowJob, readpast.MaxFlowDepth+2)
	for i := range chain {
		chain[i] = j(fmt.Sprint("j", i))
		if i > 0 {
			chain[i].After = []readpast.After{{Ref: fmt.Sprint("j", i-1)}}
		}
	}
	cases := []struct {
		name  string
		flow  []readpast.FlowJob
		field string
	}{
		{"empty", nil, "jobs"},
		{"missing ref", []readpast.FlowJob{j("a"), j("b", readpast.After{Ref: "c"})}, "jobs[1].after[0].ref"},
		{"self", []readpast.FlowJob{j("a", readpast.After{Ref: "a"})}, "jobs[0].after[0].ref"},
		{"cycle", []readpast.FlowJob{j("a", readpast.After{Ref: "c"}), j("b", readpast.After{Ref: "a"}), j("c", readpast.After{Ref: "b"})}, "after"},
		{"duplicate ref", []readpast.FlowJob{j("a"), j("a")}, "jobs[1].ref"},
		{"parent twice", []readpast.FlowJob{j("a"), j("b", readpast.After{Ref: "a"}, readpast.After{Ref: "a"})}, "jobs[1].after[1].ref"},
		{"job id twice", []readpast.FlowJob{j("a", readpast.After{JobID: 7}, readpast.After{JobID: 7})}, "jobs[0].after[1].job_id"},
		{"both ref and id", []readpast.FlowJob{j("a"), j("b", readpast.After{Ref: "a", JobID: 3})}, "jobs[1].after[0]"},
		{"neither", []readpast.FlowJob{j("b", readpast.After{})}, "jobs[0].after[0]"},
		{"bad policy", []readpast.FlowJob{j("a"), j("b", readpast.After{Ref: "a", Policy: "maybe"})}, "jobs[1].after[0].policy"},
		{"unique key", []readpast.FlowJob{{Job: readpast.EnqueueParams{Kind: "k", UniqueKey: "u"}}}, "jobs[0].unique_key"},
		{"bad job", []readpast.FlowJob{{Job: readpast.EnqueueParams{}}}, "jobs[0].kind"},
		{"too deep", chain, "after"},
	}
	for _, tc := range cases {
		_, err := readpast.NormalizeFlow(tc.flow, time.Now())
		var fe *readpast.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, readpast.ErrInvalid) || !strings.Contains(fe.Field, tc.field) {
			t.Errorf("%s: %v, want a field error naming %s", tc.name, err, tc.field)
		}
	}
	ok, err := readpast.NormalizeFlow(chain[:readpast.MaxFlowDepth+1], time.Now())
	if err != nil || len(ok) != readpast.MaxFlowDepth+1 || ok[1].After[0].Policy != readpast.CancelChild {
		t.Fatalf("a chain of MaxFlowDepth edges: %v", err)
	}
	if !ok[0].Job.RunAt.IsZero() {
		t.Fatal("a zero RunAt must stay zero (now on the store's clock)")
	}
}
