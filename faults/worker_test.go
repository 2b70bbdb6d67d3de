package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/history"
	"github.com/readpast/readpast/postgres"
	"github.com/readpast/readpast/sqlite"
)

// envWorker carries a workerSpec (JSON) to a worker process: the test
// binary run again with -test.run=^TestWorkerProcess$.
const envWorker = "READPAST_FAULTS_WORKER"

// workerSpec is what one worker process does.
type workerSpec struct {
	Name    string // process name in the history
	Store   string // "postgres" or "sqlite"
	URL     string // connection string or file
	History string // history file
	Lease   time.Duration
	Workers int // MaxWorkers (and FetchLimit)
	Poll    time.Duration
	// Work is the longest a handler runs (uniformly from 0).
	Work time.Duration
	// SlowKeys are keys whose jobs' handlers run that long exactly (the
	// longest of the keys a job names), so that their concurrency binds.
	SlowKeys map[string]time.Duration
	// FailFirst fails the first attempt of jobs whose payload asks for it.
	FailFirst bool
	// RetryDelay is the retry policy's fixed delay.
	RetryDelay time.Duration
	// Log is where the client's own log goes ("" discards it).
	Log string
}

// payload is what the scenario's jobs carry.
type payload struct {
	Fail bool `json:"fail,omitempty"` // the first attempt fails
}

// TestWorkerProcess is the body of a worker process of the fault suite.
// Run directly, it skips.
func TestWorkerProcess(t *testing.T) {
	raw := os.Getenv(envWorker)
	if raw == "" {
		t.Skip("runs only as a worker process started by the fault scenarios")
	}
	var spec workerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := runWorker(ctx, spec); err != nil {
		t.Fatal(err)
	}
}

// runWorker works jobs until ctx ends, then stops gracefully.
func runWorker(ctx context.Context, spec workerSpec) error {
	hl, err := history.Create(spec.History, spec.Name)
	if err != nil {
		return err
	}
	defer hl.Close()
	logger := slog.New(slog.DiscardHandler)
	if spec.Log != "" {
		f, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var st readpast.Store
	// The database may be away when the process starts: keep trying.
	for {
		switch spec.Store {
		case "postgres":
			st, err = postgres.Open(ctx, spec.URL)
		case "sqlite":
			st, err = sqlite.Open(ctx, spec.URL, sqlite.Options{})
		default:
			return fmt.Errorf("unknown store %q", spec.Store)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		logger.Warn("open store", slog.Any("error", err))
		time.Sleep(200 * time.Millisecond)
	}
	defer st.Close()
	w := readpast.NewWorkers()
	w.Handle("work", history.Handler(hl, func(ctx context.Context, job *readpast.Job) (any, error) {
		var p payload
		_ = json.Unmarshal(job.Payload, &p)
		var work time.Duration
		if spec.Work > 0 {
			work = rand.N(spec.Work)
		}
		for _, k := range job.Keys {
			work = max(work, spec.SlowKeys[k])
		}
		time.Sleep(work)
		if p.Fail && spec.FailFirst && job.Attempt == 1 {
			return nil, fmt.Errorf("first attempt of job %d fails", job.ID)
		}
		return nil, nil
	}), nil)
	cfg := readpast.Config{
		Logger:       logger,
		WorkerID:     spec.Name,
		Workers:      w,
		Lease:        spec.Lease,
		PollInterval: spec.Poll,
		Queues:       map[string]readpast.QueueConfig{readpast.DefaultQueue: {MaxWorkers: spec.Workers, FetchLimit: spec.Workers}},
	}
	if spec.RetryDelay > 0 {
		d := spec.RetryDelay
		cfg.RetryPolicy = func(int) time.Duration { return d }
	}
	c, err := readpast.NewClient(history.Wrap(st, hl), cfg)
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// After a half-open fault, completions may still be unwritten (retried
	// over dead connections) when Stop's 10 s end: Stop gives them its
	// grace, then gives them up and returns the deadline's error, and the
	// leases expire instead, which the history judges like any other
	// outcome. Any other error fails the worker.
	if err := c.Stop(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
