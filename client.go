package readpast

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Config.
const (
	DefaultLease        = 30 * time.Second
	DefaultPollInterval = time.Second
	DefaultMaxWorkers   = 100
	DefaultFetchLimit   = 1000
	// DefaultCompleteWindow: see Config.CompleteWindow.
	DefaultCompleteWindow = time.Millisecond
	// DefaultFetchCooldown: see Config.FetchCooldown.
	DefaultFetchCooldown = 2 * time.Millisecond
	DefaultMaxSnoozes    = 100
)

// QueueConfig configures the workers of one queue.
type QueueConfig struct {
	// MaxWorkers is how many of the queue's jobs run at once in this
	// client. Defaults to DefaultMaxWorkers.
	MaxWorkers int
	// FetchLimit caps the jobs claimed in one statement. Defaults to
	// DefaultFetchLimit.
	FetchLimit int
}

// Config configures a Client. Zero fields take the defaults named.
type Config struct {
	// Logger defaults to one that discards.
	Logger *slog.Logger
	// WorkerID names this client in claims. Defaults to host-pid-random.
	WorkerID string
	// Queues to work, by name. Defaults to {DefaultQueue: {}}. Leave it
	// empty and set Workers nil for an enqueue-only client.
	Queues map[string]QueueConfig
	// Workers handles the kinds this client runs. Required to Start.
	Workers *Workers
	// Lease of each claim. Handlers' leases are extended automatically
	// every Lease/3 while they run. Defaults to DefaultLease.
	Lease time.Duration
	// PollInterval is the longest a worker waits before looking for jobs
	// when no wake-up arrives. Defaults to DefaultPollInterval.
	PollInterval time.Duration
	// RescueInterval is how often expired leases are ended. Defaults to
	// DefaultRescueInterval; negative disables the rescuer (another
	// process must run one).
	RescueInterval time.Duration
	// RetryPolicy defaults to DefaultRetryPolicy.
	RetryPolicy RetryPolicy
	// JobTimeout bounds each attempt of kinds that set no timeout of their
	// own (HandlerOptions): the handler's ctx ends after it and the attempt
	// fails with a *TimeoutError. Zero means no bound.
	JobTimeout time.Duration
	// MaxSnoozes is how many times one job may be snoozed (a handler
	// returning Snooze): a handler that snoozes a job that many times
	// already fails the attempt instead, with an error saying so.
	// Defaults to DefaultMaxSnoozes.
	MaxSnoozes int
	// Retention deletes finished jobs once they are this old, per state,
	// every RetentionInterval. The zero value keeps everything.
	Retention Retention
	// RetentionInterval defaults to DefaultRetentionInterval.
	RetentionInterval time.Duration
	// Schedules are periodic jobs declared in code: Start puts each of
	// them in the store (Store.PutSchedule) before anything else, so every
	// client and server sharing the store sees them. Schedules already in
	// the store and not listed here are left alone.
	Schedules []ScheduleParams
	// CompleteWindow is how long the completer gathers completions after
	// the first one before writing them in one statement, so that a burst
	// of finishing handlers becomes one batch instead of one write each.
	// The handler's worker is free meanwhile; only the database write
	// waits. Defaults to DefaultCompleteWindow; negative writes each
	// completion as soon as a writer is free.
	CompleteWindow time.Duration
	// FetchCooldown is the least time from the start of one claim of a
	// queue to the start of the next, after a claim that left slots
	// unfilled because the queue had no more jobs ready: jobs that arrive
	// meanwhile are claimed together, in fewer and larger claims, instead
	// of one claim each. A queue with a backlog claims without pause.
	// It is also the longest a worker slot freed while others are busy
	// waits for more to free before a claim fills it (at once when half
	// the pool is free). Defaults to DefaultFetchCooldown; negative claims
	// as soon as jobs are announced or a slot frees.
	FetchCooldown time.Duration
	// ScheduleInterval is how often this client's scheduler looks for due
	// ticks of the store's schedules (all of them, whoever declared
	// them). Defaults to DefaultScheduleInterval; negative disables the
	// scheduler (another process must run one for schedules to fire).
	ScheduleInterval time.Duration
	// TracerProvider, when set, traces enqueues and attempts with
	// OpenTelemetry spans as the messaging semantic conventions say (see
	// Tracing and docs/design/tracing.md): a producer span per enqueue,
	// whose context each job keeps, and a consumer span per attempt that
	// continues it. nil: no spans, and nothing spent on them. The global
	// provider (otel.GetTracerProvider) is never used; pass it here to
	// use it.
	TracerProvider trace.TracerProvider
	// MeterProvider, when set, records messaging.client.sent.messages and
	// messaging.process.duration. nil: no metrics.
	MeterProvider metric.MeterProvider
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		c.WorkerID = fmt.Sprintf("%s-%d-%s", cmp.Or(host, "host"), os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Queues == nil && c.Workers != nil {
		c.Queues = map[string]QueueConfig{DefaultQueue: {}}
	}
	qs := make(map[string]QueueConfig, len(c.Queues))
	for name, q := range c.Queues {
		q.MaxWorkers = cmp.Or(q.MaxWorkers, DefaultMaxWorkers)
		q.FetchLimit = cmp.Or(q.FetchLimit, DefaultFetchLimit)
		qs[name] = q
	}
	c.Queues = qs
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.RescueInterval = cmp.Or(c.RescueInterval, DefaultRescueInterval)
	c.ScheduleInterval = cmp.Or(c.ScheduleInterval, DefaultScheduleInterval)
	c.CompleteWindow = cmp.Or(c.CompleteWindow, DefaultCompleteWindow)
	c.FetchCooldown = cmp.Or(c.FetchCooldown, DefaultFetchCooldown)
	c.MaxSnoozes = cmp.Or(c.MaxSnoozes, DefaultMaxSnoozes)
	if c.RetryPolicy == nil {
		c.RetryPolicy = DefaultRetryPolicy
	}
	return c
}

func (c Config) validate() error {
	for name, q := range c.Queues {
		if err := checkName("Queues", name, true); err != nil {
			return err
		}
		if q.MaxWorkers < 1 || q.MaxWorkers > MaxClaimLimit {
			return invalid("Queues["+name+"].MaxWorkers", "must be between 1 and %d", MaxClaimLimit)
		}
		if q.FetchLimit < 1 || q.FetchLimit > MaxClaimLimit {
			return invalid("Queues["+name+"].FetchLimit", "must be between 1 and %d", MaxClaimLimit)
		}
	}
	if err := checkName("WorkerID", c.WorkerID, true); err != nil {
		return err
	}
	if c.Lease < 100*time.Millisecond || c.Lease > MaxLease {
		return invalid("Lease", "must be between 100ms and %s", MaxLease)
	}
	if c.PollInterval < time.Millisecond {
		return invalid("PollInterval", "must be at least 1ms")
	}
	if c.CompleteWindow > time.Second {
		return invalid("CompleteWindow", "must be at most 1s (negative for none)")
	}
	if c.FetchCooldown > time.Second {
		return invalid("FetchCooldown", "must be at most 1s (negative for none)")
	}
	if c.JobTimeout < 0 {
		return invalid("JobTimeout", "must not be negative (zero means no timeout)")
	}
	if c.MaxSnoozes < 1 || c.MaxSnoozes > 1_000_000 {
		return invalid("MaxSnoozes", "must be between 1 and 1000000 (zero takes the default, %d)", DefaultMaxSnoozes)
	}
	if c.Retention.Succeeded < 0 || c.Retention.Failed < 0 || c.Retention.Cancelled < 0 {
		return invalid("Retention", "must not be negative")
	}
	seen := map[string]bool{}
	for i, p := range c.Schedules {
		if _, _, err := p.Normalize(time.Now()); err != nil {
			if fe := (*FieldError)(nil); errors.As(err, &fe) {
				return prefixField(fmt.Sprintf("Schedules[%d].", i), fe)
			}
			return fmt.Errorf("schedule %d: %w", i, err)
		}
		if seen[p.Name] {
			return invalid(fmt.Sprintf("Schedules[%d].name", i), "%q is declared twice", p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// Client enqueues jobs and, once started, works them with a pool per queue.
type Client struct {
	store Store
	flows FlowInspector // the store's, if it keeps flows: set on jobs handed to handlers
	cfg   Config
	log   *slog.Logger

	trace *Tracing // nil: no spans or metrics

	mu      sync.Mutex // protects the fields below
	started bool
	stopped bool
	stop    context.CancelFunc // stops claiming, rescuing and wake-ups
	abort   context.CancelCauseFunc
	wg      sync.WaitGroup // producers and the rescuer
	jobs    sync.WaitGroup // running handlers
	// handlers counts them too, so that Stop can tell whether any is
	// left when its ctx ends.
	handlers atomic.Int64
	done     *completer
}

// NewClient makes a client on store. It validates cfg and changes nothing
// in the store.
func NewClient(store Store, cfg Config) (*Client, error) {
	if store == nil {
		return nil, invalid("store", "is nil")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	t, err := newTracing(cfg.TracerProvider, cfg.MeterProvider, cfg.WorkerID)
	if err != nil {
		return nil, fmt.Errorf("readpast: metrics: %w", err)
	}
	flows, _ := store.(FlowInspector)
	return &Client{store: store, flows: flows, cfg: cfg, trace: t, log: cfg.Logger.With(slog.String("worker", cfg.WorkerID))}, nil
}

// Store returns the client's store.
func (c *Client) Store() Store { return c.store }

// WorkerID returns the name this client claims under.
func (c *Client) WorkerID() string { return c.cfg.WorkerID }

// Enqueue adds jobs, all or none, in one round trip, traced when the
// client has a TracerProvider (Tracing.Enqueue).
func (c *Client) Enqueue(ctx context.Context, jobs ...EnqueueParams) ([]*Job, error) {
	if c.trace == nil {
		return c.store.Enqueue(ctx, jobs)
	}
	return c.trace.Enqueue(ctx, jobs, c.store.Enqueue)
}

// EnqueueSQLTx adds jobs inside the caller's database/sql transaction
// (SQLTxStore.EnqueueSQLTx: they exist if and only if tx commits), traced
// as Enqueue is. The client's store must implement SQLTxStore.
func (c *Client) EnqueueSQLTx(ctx context.Context, tx *sql.Tx, jobs ...EnqueueParams) ([]*Job, error) {
	ts, ok := c.store.(SQLTxStore)
	if !ok {
		return nil, fmt.Errorf("readpast: EnqueueSQLTx: store %T cannot join a database/sql transaction", c.store)
	}
	return c.EnqueueWith(ctx, func(ctx context.Context, jobs []EnqueueParams) ([]*Job, error) {
		return ts.EnqueueSQLTx(ctx, tx, jobs)
	}, jobs...)
}

// EnqueueWith adds jobs through insert, traced as Enqueue is: for the
// enqueues Client has no method for, such as postgres.Store.EnqueueTx
// in a pgx transaction:
//
//	c.EnqueueWith(ctx, func(ctx context.Context, ps []readpast.EnqueueParams) ([]*readpast.Job, error) {
//		return pgStore.EnqueueTx(ctx, tx, ps)
//	}, params...)
func (c *Client) EnqueueWith(ctx context.Context, insert InsertFunc, jobs ...EnqueueParams) ([]*Job, error) {
	return c.trace.Enqueue(ctx, jobs, insert)
}

// Start begins claiming and working jobs of the configured queues until
// Stop. ctx bounds only the start itself.
func (c *Client) Start(ctx context.Context) error {
	if c.cfg.Workers == nil || len(c.cfg.Workers.handlers) == 0 {
		return invalid("Workers", "no handlers registered")
	}
	if len(c.cfg.Queues) == 0 {
		return invalid("Queues", "no queues to work")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("readpast: client stopped: a Client starts once; make a new one")
	}
	if c.started {
		return errors.New("readpast: client already started")
	}
	if err := SyncSchedules(ctx, c.store, c.cfg.Schedules); err != nil {
		return fmt.Errorf("readpast: sync schedules: %w", err)
	}
	c.started = true
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	workCtx, abort := context.WithCancelCause(context.WithoutCancel(ctx))
	c.stop, c.abort = stop, abort
	c.done = newCompleter(c.store, c.log, c.cfg.Lease, c.cfg.CompleteWindow)
	c.done.start()
	var wake <-chan struct{}
	if n, ok := c.store.(Notifier); ok {
		ch, err := n.Subscribe(runCtx)
		if err != nil {
			c.log.WarnContext(ctx, "no wake-ups, polling only", slog.Any("error", err))
		} else {
			wake = ch
		}
	}
	fan := newFanout(wake, len(c.cfg.Queues))
	for name, q := range c.cfg.Queues {
		p := &producer{client: c, queue: name, cfg: q, wake: fan.out(), workCtx: workCtx, spans: c.trace.processSpans(workCtx, name)}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			p.run(runCtx)
		}()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fan.run(runCtx)
	}()
	if c.cfg.RescueInterval > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			RunRescuer(runCtx, c.store, c.cfg.RescueInterval, c.log)
		}()
	}
	if c.cfg.ScheduleInterval > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			NewScheduler(c.store, SchedulerConfig{Interval: c.cfg.ScheduleInterval, Logger: c.log}).Run(runCtx)
		}()
	}
	if c.cfg.Retention != (Retention{}) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			RunRetention(runCtx, c.store, c.cfg.Retention, c.cfg.RetentionInterval, c.log)
		}()
	}
	c.log.InfoContext(ctx, "client started", slog.Int("queues", len(c.cfg.Queues)))
	return nil
}

// stopGrace is how long Stop waits, after cancelling handlers, for them to
// return. A handler that ignores its context is left behind: its job's
// lease expires and its late outcome is refused.
const stopGrace = 5 * time.Second

// Stop shuts down gracefully: it stops claiming, waits for running
// handlers until ctx ends, then cancels the rest (their ctx's cause is
// ErrShutdown) and releases their jobs for other workers, and finally
// writes the outstanding completions. It returns ctx's error if handlers
// had to be cancelled, or if completions were still unwritten stopGrace
// after ctx ended (the store unreachable): those are given up, and their
// jobs' leases expire so they run again. It returns within about ctx's
// deadline plus twice stopGrace, whatever handlers and the store do, once
// a claim in flight has returned (claims are bounded on their own).
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	if !c.started || c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()

	c.stop()
	c.wg.Wait() // no new claims from here on
	idle := make(chan struct{})
	go func() { c.jobs.Wait(); close(idle) }()
	var err error
	select {
	case <-idle:
	case <-ctx.Done():
		if c.handlers.Load() == 0 { // none to cancel: a clean stop
			<-idle
			break
		}
		err = ctx.Err()
		c.abort(ErrShutdown)
		select {
		case <-idle:
		case <-time.After(stopGrace):
			c.log.Error("handlers ignored cancellation; their leases will expire")
		}
	}
	c.abort(ErrShutdown)
	if cerr := c.done.close(ctx, stopGrace); err == nil {
		err = cerr
	}
	c.log.InfoContext(ctx, "client stopped")
	return err
}

// fanout copies one wake-up channel to each producer.
type fanout struct {
	in   <-chan struct{}
	outs []chan struct{}
}

func newFanout(in <-chan struct{}, n int) *fanout {
	return &fanout{in: in, outs: make([]chan struct{}, 0, n)}
}

func (f *fanout) out() <-chan struct{} {
	c := make(chan struct{}, 1)
	f.outs = append(f.outs, c)
	return c
}

func (f *fanout) run(ctx context.Context) {
	if f.in == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-f.in:
			if !ok {
				return
			}
			for _, c := range f.outs {
				select {
				case c <- struct{}{}:
				default:
				}
			}
		}
	}
}
