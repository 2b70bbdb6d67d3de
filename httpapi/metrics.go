package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/buildinfo"
)

// statsTimeout bounds the Store.Stats call made at scrape time.
const statsTimeout = 5 * time.Second

// Defaults of Config.MetricsMaxQueues and Config.MetricsMaxKinds.
const (
	DefaultMetricsMaxQueues = 50
	DefaultMetricsMaxKinds  = 50
)

// OtherLabel is the queue or kind label of the series that sum up the
// queues and kinds beyond the configured number.
const OtherLabel = "_other"

// labelCap hands out label values: the first max distinct values keep
// their name, later ones become OtherLabel, so a label's values, and the
// series that carry them, stay bounded however many names the jobs use.
type labelCap struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool // protected by mu
}

func newLabelCap(max int) *labelCap { return &labelCap{max: max, seen: map[string]bool{}} }

// value returns v, or OtherLabel once max other values have been seen.
func (c *labelCap) value(v string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[v] {
		return v
	}
	if len(c.seen) >= c.max {
		return OtherLabel
	}
	c.seen[v] = true
	return v
}

// metrics holds the server's Prometheus metrics. A nil *metrics records
// nothing, so handlers call it unconditionally.
type metrics struct {
	enqueued   *prometheus.CounterVec
	claimed    *prometheus.CounterVec
	completed  *prometheus.CounterVec
	failed     *prometheus.CounterVec
	claimTime  prometheus.Histogram
	startDelay prometheus.Histogram
	requests   *prometheus.CounterVec
	reqTime    *prometheus.HistogramVec
	queues     *labelCap
	kinds      *labelCap
	inFlight   *inFlightLabels
}

// labels returns the queue and kind labels of j, folded into OtherLabel
// beyond the caps.
func (m *metrics) labels(j *readpast.Job) (string, string) {
	return m.queues.value(j.Queue), m.kinds.value(j.Kind)
}

// newMetrics creates the metrics and registers them, with a queue depth
// collector over store, on reg. Counters carry at most maxQueues queue
// labels and maxKinds kind labels besides OtherLabel.
func newMetrics(reg *prometheus.Registry, store readpast.Store, log *slog.Logger, maxQueues, maxKinds int) (*metrics, error) {
	m := &metrics{
		queues: newLabelCap(maxQueues),
		kinds:  newLabelCap(maxKinds),
		// As many as a few seconds of a busy server's claims.
		inFlight: newInFlightLabels(1 << 16),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "readpast_jobs_enqueued_total",
			Help: "Jobs enqueued through the HTTP API.",
		}, []string{"queue", "kind"}),
		claimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "readpast_jobs_claimed_total",
			Help: "Jobs claimed through the HTTP API.",
		}, []string{"queue", "kind"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "readpast_jobs_completed_total",
			Help: "Jobs completed as succeeded through the HTTP API.",
		}, []string{"queue", "kind"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "readpast_jobs_failed_total",
			Help: "Failed attempts reported through the HTTP API (retried or final).",
		}, []string{"queue", "kind"}),
		claimTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "readpast_claim_duration_seconds",
			Help:    "Time one Store.Claim call takes, long-poll waiting excluded.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		startDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "readpast_job_start_delay_seconds",
			Help:    "Time from when a job became runnable (the later of run_at and created_at) to its claim.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 14),
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "readpast_http_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		reqTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "readpast_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern, long polls included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 12),
		}, []string{"route"}),
	}
	depth := NewQueueCollector(store, QueueCollectorOptions{MaxQueues: maxQueues, Logger: log})
	bi := buildinfo.Get()
	build := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "readpast_build_info",
		Help:        "Always 1: the version and revision of the running build.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "go_version": bi.GoVersion},
	}, func() float64 { return 1 })
	for _, c := range []prometheus.Collector{
		m.enqueued, m.claimed, m.completed, m.failed, m.claimTime, m.startDelay,
		m.requests, m.reqTime, depth, build,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) jobsEnqueued(jobs []*readpast.Job) {
	if m == nil {
		return
	}
	for _, j := range jobs {
		if !j.Duplicate {
			m.enqueued.WithLabelValues(m.labels(j)).Inc()
		}
	}
}

func (m *metrics) jobsClaimed(jobs []*readpast.Job, took time.Duration, now time.Time) {
	if m == nil {
		return
	}
	m.claimTime.Observe(took.Seconds())
	for _, j := range jobs {
		m.claimed.WithLabelValues(m.labels(j)).Inc()
		m.inFlight.add(j.ID, j.Queue, j.Kind)
		claimedAt := now
		if j.StartedAt != nil {
			claimedAt = *j.StartedAt
		}
		ready := j.RunAt
		if j.CreatedAt.After(ready) {
			ready = j.CreatedAt
		}
		m.startDelay.Observe(max(claimedAt.Sub(ready), 0).Seconds())
	}
}

func (m *metrics) jobCompleted(j *readpast.Job) {
	if m == nil || j == nil {
		return
	}
	m.inFlight.take(j.ID)
	m.completed.WithLabelValues(m.labels(j)).Inc()
}

func (m *metrics) jobFailed(j *readpast.Job) {
	if m == nil || j == nil {
		return
	}
	m.inFlight.take(j.ID)
	m.failed.WithLabelValues(m.labels(j)).Inc()
}

func (m *metrics) request(route string, code int, took time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.reqTime.WithLabelValues(route).Observe(took.Seconds())
}

// QueueCollectorOptions configures NewQueueCollector.
type QueueCollectorOptions struct {
	// MaxQueues is how many queues get series of their own: the ones with
	// the most jobs at scrape time. The others are summed up under
	// queue="_other" (OtherLabel). 0 means DefaultMetricsMaxQueues.
	MaxQueues int
	// Logger receives failed Queues calls; nil discards them.
	Logger *slog.Logger
}

// NewQueueCollector returns a Prometheus collector of the jobs in store
// per queue and state, counted by Store.Queues at each scrape:
// readpast_queue_jobs{queue, state}, readpast_queues_paused (how many
// queues are paused) and readpast_queue_stats_up (1 when the count worked). Only queues that hold jobs have series, at most
// opts.MaxQueues of them plus one for the rest, each with every state, so
// the number of series is bounded however many queue names are used.
//
// readpast serve registers one; programs that run a readpast.Client
// register their own:
//
//	reg.MustRegister(httpapi.NewQueueCollector(store, httpapi.QueueCollectorOptions{}))
func NewQueueCollector(store readpast.Store, opts QueueCollectorOptions) prometheus.Collector {
	if opts.MaxQueues <= 0 {
		opts.MaxQueues = DefaultMetricsMaxQueues
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &depthCollector{
		store: store,
		log:   opts.Logger,
		max:   opts.MaxQueues,
		desc: prometheus.NewDesc("readpast_queue_jobs",
			"Jobs per queue and state, counted by Store.Queues at scrape time; queues beyond the busiest ones are summed under queue=\"_other\".",
			[]string{"queue", "state"}, nil),
		up: prometheus.NewDesc("readpast_queue_stats_up",
			"1 when the last scrape's Store.Queues call succeeded, else 0.", nil, nil),
		paused: prometheus.NewDesc("readpast_queues_paused",
			"How many queues are paused (GET /v1/queues names them).", nil, nil),
	}
}

// depthCollector reports job counts per queue and state by calling
// Store.Queues at scrape time.
type depthCollector struct {
	store  readpast.Store
	log    *slog.Logger
	max    int
	desc   *prometheus.Desc
	up     *prometheus.Desc
	paused *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.up
	ch <- c.paused
}

// Collect implements prometheus.Collector.
func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	qs, err := c.store.Queues(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: store stats", slog.Any("error", err))
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	res := NewStatsResponse(QueueStatsOf(qs), qs)
	ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, float64(len(res.Paused)))
	queues := res.Queues
	type queueTotal struct {
		name  string
		total int64
	}
	var order []queueTotal
	for q, states := range queues {
		var t int64
		for _, n := range states {
			t += n
		}
		if t > 0 {
			order = append(order, queueTotal{q, t})
		}
	}
	// The busiest queues keep their name; ties by name, so that the set
	// is stable between scrapes.
	slices.SortFunc(order, func(a, b queueTotal) int {
		return cmp.Or(cmp.Compare(b.total, a.total), cmp.Compare(a.name, b.name))
	})
	other := map[readpast.JobState]int64{}
	for i, q := range order {
		if i < c.max {
			for state, n := range queues[q.name] {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), q.name, string(state))
			}
			continue
		}
		for state, n := range queues[q.name] {
			other[state] += n
		}
	}
	if len(order) > c.max {
		for _, state := range readpast.AllStates {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(other[state]), OtherLabel, string(state))
		}
	}
}
