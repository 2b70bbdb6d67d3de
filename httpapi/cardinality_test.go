package httpapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readpast/readpast"
)

// TestMetricsBoundedByConfig: 10,000 queue and kind names give a bounded
// number of series: the first names keep their own series, the rest are
// counted under "_other". (It was 60,248 series and a 3.4 MB scrape.)
func TestMetricsBoundedByConfig(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MetricsMaxQueues = 20; c.MetricsMaxKinds = 10 })
	const n = 10000
	for b := 0; b < n/1000; b++ {
		var jobs []string
		for i := b * 1000; i < (b+1)*1000; i++ {
			jobs = append(jobs, fmt.Sprintf(`{"kind":"k%d","queue":"q%d"}`, i, i))
		}
		e.must("POST", "/v1/jobs/batch", `{"jobs":[`+strings.Join(jobs, ",")+`]}`, 201, nil)
	}
	// The busiest queue keeps its own depth series.
	for range 3 {
		e.enqueue(`{"kind":"k0","queue":"busy"}`)
	}
	raw := string(e.must("GET", "/metrics", "", 200, nil))
	series := map[string]int{}
	for _, line := range strings.Split(raw, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		series[name]++
	}
	// Counters: (20 queues + _other) x (10 kinds + _other) at most; here
	// queue and kind grow together, so 20 pairs and a few mixed ones.
	if got := series["readpast_jobs_enqueued_total"]; got > 21*11 || got < 20 {
		t.Errorf("%d enqueued series", got)
	}
	// Depth: 20 queues and _other, every state.
	if got := series["readpast_queue_jobs"]; got != 21*len(readpast.AllStates) {
		t.Errorf("%d queue depth series, want %d", got, 21*len(readpast.AllStates))
	}
	for _, want := range []string{
		`readpast_jobs_enqueued_total{kind="k0",queue="q0"} 1`,
		`readpast_jobs_enqueued_total{kind="_other",queue="_other"} 9980`,
		`readpast_queue_jobs{queue="busy",state="pending"} 3`,
		`readpast_queue_jobs{queue="_other",state="pending"} 9981`,
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	total := 0
	for _, c := range series {
		total += c
	}
	if total > 1000 || len(raw) > 200<<10 {
		t.Errorf("%d series in %d bytes", total, len(raw))
	}
	t.Logf("%d series, %d bytes for %d queue and kind names", total, len(raw), n)
}

// TestQueueCollectorForClients: a program running a Client registers the
// same queue depth metrics on its own registry.
func TestQueueCollectorForClients(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Registry = nil })
	e.enqueue(`{"kind":"a","queue":"x"}`)
	e.enqueue(`{"kind":"a","queue":"y"}`)
	e.enqueue(`{"kind":"a","queue":"y"}`)
	if err := e.store.PauseQueue(context.Background(), "z"); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewQueueCollector(e.store, QueueCollectorOptions{MaxQueues: 1}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	if len(got) != 2+2*len(readpast.AllStates) || got["readpast_queue_stats_up"] != 1 || got["readpast_queues_paused"] != 1 ||
		got["readpast_queue_jobs,queue=y,state=pending"] != 2 || got["readpast_queue_jobs,queue=_other,state=pending"] != 1 {
		t.Errorf("gathered %v: want up, one paused queue, then y and x (as _other) with every state", got)
	}
}
