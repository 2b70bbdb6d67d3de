package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/httpapi"
)

// limitsUsage is the synopsis of `readpast limits`.
const limitsUsage = "Usage: readpast limits list|get|set|delete|take [flags]"

// runLimits runs `limits list|get|set|delete|take`, through a server's
// HTTP API or on a database directly, as the job commands do. show is
// get, as for jobs and schedules.
func runLimits(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing action: want list, get, set, delete or take")
	}
	switch args[0] {
	case "list":
		return runLimitsList(ctx, args[1:], stdout)
	case "get", "show":
		return runLimitGet(ctx, args[0], args[1:], stdout)
	case "set":
		return runLimitSet(ctx, args[1:], stdout)
	case "delete":
		return runLimitDelete(ctx, args[1:], stdout)
	case "take":
		return runLimitTake(ctx, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, limitsUsage)
		return nil
	}
	return usagef("unknown action %q: want list, get, set, delete or take", args[0])
}

// runLimitsList prints every declared limit.
func runLimitsList(ctx context.Context, args []string, stdout io.Writer) error {
	return runRead(ctx, "limits list", `print the body of GET /v1/limits: {"limits": [{"key", "concurrency", "rate", "per_seconds", "burst", "weight", "keys"}]}`,
		args, stdout, backend.limits, printLimits)
}

// printLimits writes the limits as a table, one line a limit, with its
// weight and how many keys it governs have a bucket.
func printLimits(w io.Writer, res httpapi.LimitsResponse) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tCONCURRENCY\tRATE\tBURST\tWEIGHT\tKEYS\tRUNNING")
	for _, l := range res.Limits {
		running := 0
		for _, k := range l.Keys {
			running += k.Running
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", l.Key, fmtConcurrency(l.Concurrency), fmtRate(l.Limit), fmtBurst(l.Limit),
			l.Weight, len(l.Keys), running)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// fmtConcurrency is a concurrency for people: "-" for no bound.
func fmtConcurrency(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

// fmtRate is a limit's rate for people: "10/1s", or "-" without one.
func fmtRate(l httpapi.Limit) string {
	if l.Rate == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%s", l.Rate, secondsDuration(l.PerSeconds))
}

// fmtBurst is a limit's burst for people: "-" without a rate.
func fmtBurst(l httpapi.Limit) string {
	if l.Rate == 0 {
		return "-"
	}
	return strconv.Itoa(l.Burst)
}

// secondsDuration turns a number of seconds back into a duration,
// rounded to the microsecond (the precision limits are stored with), and
// writes it as a flag would take it, without zero units: "1m", "1h30m".
func secondsDuration(secs float64) string {
	return fmtDuration(time.Duration(secs * float64(time.Second)).Round(time.Microsecond))
}

// fmtDuration writes d as time.Duration does, without trailing zero
// units: "1m" rather than "1m0s", "24h" rather than "24h0m0s".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// tokens is "1 token" or "n tokens".
func tokens(n int) string {
	if n == 1 {
		return "1 token"
	}
	return strconv.Itoa(n) + " tokens"
}

// runLimitGet prints the limit declared for a key or template with the
// states of the keys it governs.
func runLimitGet(ctx context.Context, action string, args []string, stdout io.Writer) error {
	fs := newFlagSet("limits "+action, "limits "+action+" KEY [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, "print the body of GET /v1/limits/{key}")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	key, err := limitKeyArg(pos, readpast.CheckLimitKey)
	if err != nil {
		return err
	}
	b, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer b.close()
	li, err := b.limit(ctx, key)
	if err != nil {
		return describeLimitError(action, key, err)
	}
	if *asJSON {
		return writeJSON(stdout, li)
	}
	return printLimit(stdout, li)
}

// limitKeyArg returns the one positional argument, a key checked by check.
func limitKeyArg(pos []string, check func(string) error) (string, error) {
	if len(pos) != 1 {
		return "", usagef("want exactly one key")
	}
	if err := check(pos[0]); err != nil {
		return "", usagef("%v", err)
	}
	return pos[0], nil
}

// describeLimitError words err from action on the limit of key for
// people.
func describeLimitError(action, key string, err error) error {
	if errors.Is(err, readpast.ErrLimitNotFound) {
		return fmt.Errorf("no limit is declared for %q (see 'readpast limits list')", key)
	}
	return fmt.Errorf("%s limit %s: %w", action, key, err)
}

// printLimit prints a limit, then its keys' states.
func printLimit(w io.Writer, li httpapi.LimitInfo) error {
	if err := printLimitFacts(w, li.Limit); err != nil {
		return err
	}
	if len(li.Keys) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tRUNNING\tCONCURRENCY\tTOKENS\tNEXT START")
	for _, k := range li.Keys {
		tokens := "-"
		if k.Tokens >= 0 {
			tokens = strconv.Itoa(k.Tokens)
		}
		next := "-"
		if !k.NextStart.IsZero() {
			next = fmtTimeMillis(k.NextStart)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", k.Key, k.Running, fmtConcurrency(k.Concurrency), tokens, next)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// printLimitFacts prints what a limit declares, one fact a line.
func printLimitFacts(w io.Writer, l httpapi.Limit) error {
	conc := "no bound"
	if l.Concurrency > 0 {
		conc = fmt.Sprintf("%d at once", l.Concurrency)
	}
	rate := "none"
	if l.Rate > 0 {
		rate = fmt.Sprintf("%d per %s, burst %d", l.Rate, secondsDuration(l.PerSeconds), l.Burst)
	}
	kind := "key"
	if strings.HasSuffix(l.Key, "*") {
		kind = "template: each key starting with " + strconv.Quote(strings.TrimSuffix(l.Key, "*")) + " has a bucket of its own"
	}
	return writeFacts(w, [][2]string{{"key", l.Key}, {"applies to", kind}, {"concurrency", conc}, {"rate", rate}, {"weight", strconv.Itoa(l.Weight)}})
}

// fmtTimeMillis formats a time in UTC to the millisecond, for times a
// rate makes close together.
func fmtTimeMillis(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// runLimitSet declares or replaces the limit of a key or template from
// flags.
func runLimitSet(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("limits set", "limits set KEY [--concurrency N] [--rate N [--per 1s] [--burst N]] [--weight N] [flags]", stdout)
	tf := addTargetFlags(fs)
	conc := fs.Int("concurrency", 0, fmt.Sprintf("how many of a key's jobs may run at once, 1 to %d (default: no bound)", readpast.MaxConcurrency))
	rate := fs.Int("rate", 0, "how many of a key's jobs may start per --per (default: no rate)")
	per := fs.Duration("per", 0, fmt.Sprintf("the period of --rate, up to %s (default 1s)", fmtDuration(readpast.MaxPer)))
	burst := fs.Int("burst", 0, fmt.Sprintf("how many starts may happen at once after a quiet spell, up to %d (default: --rate)", readpast.MaxBurst))
	weight := fs.Int("weight", 0, fmt.Sprintf("the key's share when keys take turns: a claim takes up to N of its jobs a round, 1 to %d (default 1)", readpast.MaxWeight))
	asJSON := fs.Bool("json", false, "print the limit as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	key, err := limitKeyArg(pos, readpast.CheckLimitKey)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var req httpapi.PutLimitRequest
	if set["concurrency"] {
		if *conc == 0 {
			return usagef("--concurrency: must be between 1 and %d; leave it out for no bound", readpast.MaxConcurrency)
		}
		req.Concurrency = conc
	}
	if set["rate"] {
		req.Rate = rate
	}
	if set["per"] {
		if *per < readpast.MinRateInterval || *per > readpast.MaxPer {
			return usagef("--per: must be between %s and %s", readpast.MinRateInterval, fmtDuration(readpast.MaxPer))
		}
		secs := per.Seconds()
		req.PerSeconds = &secs
	}
	if set["burst"] {
		req.Burst = burst
	}
	if set["weight"] {
		if *weight < 1 || *weight > readpast.MaxWeight {
			return usagef("--weight: must be between 1 and %d (default 1)", readpast.MaxWeight)
		}
		req.Weight = weight
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode limit: %w", err)
	}
	if _, err := httpapi.ParsePutLimit(key, body); err != nil {
		return usageError{limitFlagError(err)}
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	l, created, err := b.putLimit(ctx, key, body)
	if err != nil {
		return fmt.Errorf("set limit %s: %w", key, limitFlagError(err))
	}
	if *asJSON {
		return writeJSON(stdout, l)
	}
	if created {
		fmt.Fprintf(stdout, "created limit %s\n\n", l.Key)
	} else {
		fmt.Fprintf(stdout, "replaced limit %s\n\n", l.Key)
	}
	return printLimitFacts(stdout, l)
}

// limitFlagError renames the JSON field in a validation error after its
// flag.
func limitFlagError(err error) error {
	msg := err.Error()
	for _, f := range [][2]string{{"per_seconds", "per"}, {"concurrency", "concurrency"}, {"rate", "rate"}, {"burst", "burst"}, {"weight", "weight"}} {
		if after, ok := strings.CutPrefix(msg, f[0]+":"); ok {
			return fmt.Errorf("--%s:%s", f[1], after)
		}
	}
	return err
}

// runLimitDelete deletes the limit declared for a key or template.
func runLimitDelete(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("limits delete", "limits delete KEY [flags]", stdout)
	tf := addTargetFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	key, err := limitKeyArg(pos, readpast.CheckLimitKey)
	if err != nil {
		return err
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	if err := b.deleteLimit(ctx, key); err != nil {
		return describeLimitError("delete", key, err)
	}
	fmt.Fprintf(stdout, "deleted limit %s\n", key)
	return nil
}

// runLimitTake takes N starts (1 by default) from a key's rate for work
// done outside jobs, all or none. A refusal is not an error: it says when
// to come back.
func runLimitTake(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("limits take", "limits take KEY [N] [flags]", stdout)
	tf := addTargetFlags(fs)
	asJSON := fs.Bool("json", false, `print the body of POST /v1/limits/{key}/tokens: {"granted", "retry_at"}`)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		return usagef("want a key and, optionally, how many tokens to take")
	}
	n := 1
	if len(pos) == 2 {
		n, err = strconv.Atoi(pos[1])
		if err != nil || n < 1 || n > readpast.MaxTakeTokens {
			return usagef("N must be an integer between 1 and %d, not %q", readpast.MaxTakeTokens, pos[1])
		}
	}
	key, err := limitKeyArg(pos[:1], readpast.CheckKey)
	if err != nil {
		return err
	}
	b, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer b.close()
	g, err := b.takeTokens(ctx, key, n)
	if err != nil {
		return fmt.Errorf("take %s of %s: %w", tokens(n), key, err)
	}
	if *asJSON {
		return writeJSON(stdout, g)
	}
	if g.Granted {
		fmt.Fprintf(stdout, "granted %s of %s\n", tokens(n), key)
		return nil
	}
	when := "later"
	if g.RetryAt != nil {
		when = "at " + fmtTimeMillis(*g.RetryAt)
		if d := time.Until(*g.RetryAt); d > 0 {
			when += fmt.Sprintf(" (in %s)", d.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(stdout, "not granted: %s can give %s %s\n", key, tokens(n), when)
	return nil
}
