package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/readpast/readpast/httpapi"
)

// runWorker starts a worker process on a queue, waits until it has
// started wait_started jobs, sends it the signal, and reports what it
// started and finished and how long it took to exit.
func (c *api) runWorker(ctx context.Context, raw json.RawMessage) (any, error) {
	var a struct {
		Queue           string  `json:"queue"`
		Concurrency     int     `json:"concurrency"`
		ShutdownSeconds float64 `json:"shutdown_seconds"`
		WaitStarted     int     `json:"wait_started"`
		Signal          string  `json:"signal"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	sig := map[string]os.Signal{"": syscall.SIGTERM, "SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}[a.Signal]
	if sig == nil {
		return nil, &errorInfo{Code: "driver_bad_args", Message: "signal must be SIGTERM or SIGINT"}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "worker", a.Queue, strconv.Itoa(a.Concurrency), strconv.FormatFloat(a.ShutdownSeconds, 'f', -1, 64))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// The worker exits when its standard input ends: when this driver
	// exits, however it ends, the worker does not outlive it.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	started, ended := []int64{}, []int64{}
	enough := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			word, id, ok := strings.Cut(sc.Text(), " ")
			n, err := strconv.ParseInt(id, 10, 64)
			if !ok || err != nil {
				continue
			}
			mu.Lock()
			switch word {
			case "start":
				started = append(started, n)
				if len(started) == a.WaitStarted {
					close(enough)
				}
			case "end":
				ended = append(ended, n)
			}
			mu.Unlock()
		}
	}()
	exited := make(chan error, 1)
	go func() { <-read; exited <- cmd.Wait() }()
	select {
	case <-enough:
	case err := <-exited:
		return nil, fmt.Errorf("the worker exited before starting %d jobs: %v\n%s", a.WaitStarted, err, stderr.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return nil, fmt.Errorf("the worker did not start %d jobs within 30s\n%s", a.WaitStarted, stderr.String())
	}
	signalled := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		return nil, err
	}
	var exitCode int
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			exitCode = ee.ExitCode()
		} else if err != nil {
			return nil, err
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return nil, fmt.Errorf("the worker did not exit within 60s of the signal\n%s", stderr.String())
	}
	took := time.Since(signalled)
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(started, func(i, j int) bool { return started[i] < started[j] })
	sort.Slice(ended, func(i, j int) bool { return ended[i] < ended[j] })
	if exitCode != 0 {
		fmt.Fprintf(os.Stderr, "worker stderr:\n%s", stderr.String())
	}
	return map[string]any{"exit_code": exitCode, "started": started, "ended": ended, "took_ms": took.Milliseconds()}, nil
}

// runWorkerProcess is a small worker over the HTTP API: it runs "sleep"
// jobs (payload {"seconds": s}) from QUEUE, CONCURRENCY at once, printing
// "start ID" and "end ID", until SIGTERM or SIGINT; then it claims no
// more, lets running jobs finish for SHUTDOWN_SECONDS, releases those
// still running and exits.
func runWorkerProcess(args []string) error {
	if len(args) != 3 {
		return errors.New("usage: driver worker QUEUE CONCURRENCY SHUTDOWN_SECONDS")
	}
	queue := args[0]
	concurrency, err := strconv.Atoi(args[1])
	if err != nil || concurrency < 1 {
		return fmt.Errorf("concurrency %q: want a positive integer", args[1])
	}
	shutdown, err := strconv.ParseFloat(args[2], 64)
	if err != nil {
		return fmt.Errorf("shutdown seconds %q: %w", args[2], err)
	}
	c, err := newAPI(os.Getenv("READPAST_URL"), os.Getenv("READPAST_TOKEN"))
	if err != nil {
		return err
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Fprintln(os.Stderr, "worker: the driver went away; exiting")
		os.Exit(3)
	}()
	stopCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var (
		mu      sync.Mutex
		outMu   sync.Mutex
		running = map[int64]chan struct{}{} // job id -> closed to release it
		freed   = make(chan struct{}, concurrency)
		wg      sync.WaitGroup
	)
	say := func(word string, id int64) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf("%s %d\n", word, id)
	}
	work := func(j httpapi.Job) {
		defer wg.Done()
		defer func() { freed <- struct{}{} }()
		mu.Lock()
		release := running[j.ID]
		mu.Unlock()
		var p struct{ Seconds float64 }
		_ = json.Unmarshal(j.Payload, &p)
		say("start", j.ID)
		bg := context.Background()
		select {
		case <-time.After(time.Duration(p.Seconds * float64(time.Second))):
			err := c.call(bg, "POST", jobPath(j.ID, "complete"), nil,
				map[string]any{"token": j.Token, "result": map[string]any{"slept": p.Seconds}}, nil)
			if err != nil {
				fmt.Fprintf(os.Stderr, "job %d: complete: %v\n", j.ID, err)
			} else {
				say("end", j.ID)
			}
		case <-release:
			if err := c.call(bg, "POST", jobPath(j.ID, "release"), nil, httpapi.ReleaseRequest{Token: j.Token}, nil); err != nil {
				fmt.Fprintf(os.Stderr, "job %d: release: %v\n", j.ID, err)
			}
			fmt.Fprintf(os.Stderr, "job %d: still running at the shutdown deadline; released\n", j.ID)
		}
		mu.Lock()
		delete(running, j.ID)
		mu.Unlock()
	}
	free := concurrency
	wait, lease := 5.0, 30.0
	for stopCtx.Err() == nil {
		for more := true; more; {
			select {
			case <-freed:
				free++
			default:
				more = false
			}
		}
		for free == 0 {
			select {
			case <-freed:
				free++
			case <-stopCtx.Done():
			}
			if stopCtx.Err() != nil {
				break
			}
		}
		if stopCtx.Err() != nil {
			break
		}
		// The claim is cancelled by the signal: a client that goes away
		// while waiting is given nothing.
		jobs, err := c.claimJobs(stopCtx, httpapi.ClaimRequest{Worker: "go-conformance", Queues: []string{queue},
			Limit: &free, LeaseSeconds: &lease, WaitSeconds: &wait})
		if err != nil {
			if stopCtx.Err() != nil {
				break
			}
			fmt.Fprintf(os.Stderr, "claim: %v\n", err)
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, j := range jobs {
			free--
			mu.Lock()
			running[j.ID] = make(chan struct{})
			mu.Unlock()
			wg.Add(1)
			go work(j)
		}
	}
	fmt.Fprintln(os.Stderr, "signal received; stopping")
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-time.After(time.Duration(shutdown * float64(time.Second))):
		mu.Lock()
		for _, ch := range running {
			close(ch)
		}
		mu.Unlock()
		<-allDone
	}
	return nil
}
