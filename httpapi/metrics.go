package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/readpast/readpast"
)

// statsTimeout bounds the Store.Stats call made at scrape time.
const statsTimeout = 5 * time.Second

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
}

// newMetrics creates the metrics and registers them, with a queue depth
// collector over store, on reg.
func newMetrics(reg *prometheus.Registry, store readpast.Store, log *slog.Logger) (*metrics, error) {
	m := &metrics{
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
	depth := &depthCollector{
		store: store,
		log:   log,
		desc: prometheus.NewDesc("readpast_queue_jobs",
			"Jobs per queue and state, counted by Store.Stats at scrape time.",
			[]string{"queue", "state"}, nil),
		up: prometheus.NewDesc("readpast_queue_stats_up",
			"1 when the last scrape's Store.Stats call succeeded, else 0.", nil, nil),
	}
	for _, c := range []prometheus.Collector{
		m.enqueued, m.claimed, m.completed, m.failed, m.claimTime, m.startDelay,
		m.requests, m.reqTime, depth,
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
		m.enqueued.WithLabelValues(j.Queue, j.Kind).Inc()
	}
}

func (m *metrics) jobsClaimed(jobs []*readpast.Job, took time.Duration, now time.Time) {
	if m == nil {
		return
	}
	m.claimTime.Observe(took.Seconds())
	for _, j := range jobs {
		m.claimed.WithLabelValues(j.Queue, j.Kind).Inc()
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
	m.completed.WithLabelValues(j.Queue, j.Kind).Inc()
}

func (m *metrics) jobFailed(j *readpast.Job) {
	if m == nil || j == nil {
		return
	}
	m.failed.WithLabelValues(j.Queue, j.Kind).Inc()
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

// depthCollector reports job counts per queue and state by calling
// Store.Stats at scrape time.
type depthCollector struct {
	store readpast.Store
	log   *slog.Logger
	desc  *prometheus.Desc
	up    *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.up
}

// Collect implements prometheus.Collector.
func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	stats, err := c.store.Stats(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "metrics: store stats", slog.Any("error", err))
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for queue, states := range NewStatsResponse(stats).Queues {
		for state, n := range states {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), queue, string(state))
		}
	}
}
