// Command readpast-loadcheck measures what idle long-polling claims cost a
// running `readpast serve` on PostgreSQL: the database's committed
// transactions per second (pg_stat_database.xact_commit) while N claims
// wait on an empty queue, and the latency of other requests (stats,
// enqueue, claim) meanwhile.
//
// Usage:
//
//	readpast-loadcheck --url http://127.0.0.1:8080 --pg postgres://.../app \
//	    --waiters 0,100,1000 --duration 20s
//
// It is a development tool, the source of the figures in
// docs/http-api.md; it sends requests only to the URL given.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "readpast server")
	token := flag.String("token", os.Getenv("READPAST_TOKEN"), "bearer token")
	pgURL := flag.String("pg", "", "PostgreSQL URL of the server's database (to read pg_stat_database)")
	counts := flag.String("waiters", "0,100,1000", "numbers of idle waiting claims to measure, comma-separated")
	duration := flag.Duration("duration", 20*time.Second, "measuring window for each number")
	waitFor := flag.Duration("wait", 20*time.Second, "each waiting claim's wait_seconds; a waiter claims again when it ends, as workers do")
	flag.Parse()
	if *pgURL == "" {
		fmt.Fprintln(os.Stderr, "readpast-loadcheck: --pg is required")
		os.Exit(2)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, *pgURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "readpast-loadcheck:", err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2000}}
	c := client{hc: hc, base: strings.TrimSuffix(*url, "/"), token: *token}

	fmt.Printf("%8s %10s  %-28s %-28s %-28s\n", "waiters", "xact/s", "stats p50/p95/max ms", "enqueue p50/p95/max ms", "claim p50/p95/max ms")
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "readpast-loadcheck: bad --waiters entry %q\n", f)
			os.Exit(2)
		}
		if err := measure(ctx, c, conn, n, *duration, *waitFor); err != nil {
			fmt.Fprintln(os.Stderr, "readpast-loadcheck:", err)
			os.Exit(1)
		}
	}
}

// measure runs n idle waiters, each long-polling for waitFor at a time,
// for d and prints one line of figures.
func measure(ctx context.Context, c client, conn *pgx.Conn, n int, d, waitFor time.Duration) error {
	claimsBefore, _ := c.claimCount(ctx)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var failed sync.Once
	var waitErr error
	wait := fmt.Sprintf(`{"worker":"idle","queues":["loadcheck-idle"],"wait_seconds":%g}`, waitFor.Seconds())
	for range n {
		wg.Go(func() {
			for wctx.Err() == nil {
				if _, err := c.post(wctx, "/v1/claim", wait); err != nil && wctx.Err() == nil {
					failed.Do(func() { waitErr = err })
					return
				}
			}
		})
	}
	// Let the waiters arrive (each claims once as it does), then the
	// database's counters settle: backends flush them at least every second.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, err := c.claimCount(ctx); err != nil || got-claimsBefore >= float64(n) {
			break
		}
	}
	time.Sleep(2 * time.Second)
	before, err := commits(ctx, conn)
	if err != nil {
		stop()
		return err
	}
	start := time.Now()
	var stats, enq, claim []time.Duration
	for time.Since(start) < d {
		for _, r := range []struct {
			into *[]time.Duration
			do   func() error
		}{
			{&stats, func() error { _, err := c.get(ctx, "/v1/stats"); return err }},
			{&enq, func() error {
				_, err := c.post(ctx, "/v1/jobs", `{"kind":"probe","queue":"loadcheck-busy"}`)
				return err
			}},
			{&claim, func() error {
				_, err := c.post(ctx, "/v1/claim", `{"worker":"probe","queues":["loadcheck-busy"],"lease_seconds":3600}`)
				return err
			}},
		} {
			t := time.Now()
			if err := r.do(); err != nil {
				stop()
				return err
			}
			*r.into = append(*r.into, time.Since(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	time.Sleep(1500 * time.Millisecond) // backends flush their counters at least every second
	after, err := commits(ctx, conn)
	stop()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("read the commit counter: %w", err)
	}
	if waitErr != nil {
		return fmt.Errorf("a waiting claim failed: %w", waitErr)
	}
	fmt.Printf("%8d %10.1f  %-28s %-28s %-28s\n", n, float64(after-before)/(elapsed+1500*time.Millisecond).Seconds(),
		pct(stats), pct(enq), pct(claim))
	return nil
}

// claimCount reads how many claims the server has made from its metrics
// (readpast_claim_duration_seconds_count).
func (c client) claimCount(ctx context.Context) (float64, error) {
	b, err := c.get(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "readpast_claim_duration_seconds_count "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, nil
}

// commits reads the database's committed transactions so far.
func commits(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n)
	return n, err
}

// pct formats the median, 95th percentile and maximum of ds in ms.
func pct(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
	return ms(ds[len(ds)/2]) + " / " + ms(ds[len(ds)*95/100]) + " / " + ms(ds[len(ds)-1])
}

// client sends requests to the server.
type client struct {
	hc    *http.Client
	base  string
	token string
}

func (c client) get(ctx context.Context, path string) ([]byte, error) {
	return c.do(ctx, http.MethodGet, path, "")
}

func (c client) post(ctx context.Context, path, body string) ([]byte, error) {
	return c.do(ctx, http.MethodPost, path, body)
}

func (c client) do(ctx context.Context, method, path, body string) ([]byte, error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, errors.New(method + " " + path + ": " + resp.Status + ": " + string(b))
	}
	return b, nil
}
