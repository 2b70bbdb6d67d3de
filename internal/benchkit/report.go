package benchkit

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
)

// round strips the " #n" a repeated run adds to a scenario's name.
var round = regexp.MustCompile(` #[0-9]+$`)

// compared is one scenario's median figures on two systems.
type compared struct {
	scenario           string
	a, b               Result // medians (per second, p50, p99, extras)
	ratio              float64
	p50ratio, p99ratio float64
	extra              map[string][2]float64
}

// median returns the result whose PerSec is the median of rs, with the
// median latencies and extras of rs.
func median(rs []Result) Result {
	if len(rs) == 0 {
		return Result{}
	}
	med := func(f func(Result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out := rs[0]
	out.PerSec = med(func(r Result) float64 { return r.PerSec })
	out.P50Ms = med(func(r Result) float64 { return r.P50Ms })
	out.P99Ms = med(func(r Result) float64 { return r.P99Ms })
	out.Extra = map[string]float64{}
	for k := range rs[0].Extra {
		out.Extra[k] = med(func(r Result) float64 { return r.Extra[k] })
	}
	return out
}

// compare pairs the results of systems a and b per scenario, in the order
// the scenarios ran.
func compare(results []Result, a, b string) []compared {
	var order []string
	by := map[string]map[string][]Result{}
	for _, r := range results {
		sc := round.ReplaceAllString(r.Scenario, "")
		if by[sc] == nil {
			by[sc] = map[string][]Result{}
			order = append(order, sc)
		}
		by[sc][r.System] = append(by[sc][r.System], r)
	}
	var out []compared
	for _, sc := range order {
		c := compared{scenario: sc, a: median(by[sc][a]), b: median(by[sc][b]), extra: map[string][2]float64{}}
		c.ratio = div(c.a.PerSec, c.b.PerSec)
		c.p50ratio = div(c.b.P50Ms, c.a.P50Ms)
		c.p99ratio = div(c.b.P99Ms, c.a.P99Ms)
		for k, v := range c.a.Extra {
			c.extra[k] = [2]float64{v, c.b.Extra[k]}
		}
		for k, v := range c.b.Extra {
			c.extra[k] = [2]float64{c.a.Extra[k], v}
		}
		out = append(out, c)
	}
	return out
}

func div(x, y float64) float64 {
	if y == 0 || x == 0 {
		return math.NaN()
	}
	return x / y
}

// WriteComparison prints, per scenario, the median figures of systems a
// and b and their ratios: throughput a/b, latency b/a (above 1 is better
// for a either way).
func WriteComparison(w io.Writer, results []Result, a, b string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\t%s /s\t%s /s\tratio\tp50 ms\tp99 ms\textra\t\n", a, b)
	for _, c := range compare(results, a, b) {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t\n", c.scenario, c.a.PerSec, c.b.PerSec, ratio(c.ratio),
			pair(c.a.P50Ms, c.b.P50Ms, c.p50ratio), pair(c.a.P99Ms, c.b.P99Ms, c.p99ratio), extras(c.extra))
	}
	return tw.Flush()
}

func ratio(r float64) string {
	if math.IsNaN(r) {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

func pair(a, b, r float64) string {
	if a == 0 && b == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s (%s)", ms(a), ms(b), ratio(r))
}

func extras(m map[string][2]float64) string {
	var out []string
	for _, k := range slices.Sorted(mapKeys(m)) {
		out = append(out, fmt.Sprintf("%s=%.3g/%.3g", k, m[k][0], m[k][1]))
	}
	return strings.Join(out, " ")
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// WriteReport writes into dir: results.json (every result), comparison.txt
// (WriteComparison) and SVG plots: throughput over time of the paced and
// harness scenarios, and drain throughput against the history and backlog
// sizes.
func WriteReport(dir string, results []Result, a, b string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return err
	}
	var cmp strings.Builder
	if err := WriteComparison(&cmp, results, a, b); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "comparison.txt"), []byte(cmp.String()), 0o644); err != nil {
		return err
	}
	// Throughput over time: the first run of each scenario per system.
	for _, sc := range []string{"paced", "harness"} {
		var lines []Line
		seen := map[string]bool{}
		for _, r := range results {
			name := round.ReplaceAllString(r.Scenario, "")
			if !strings.HasPrefix(name, sc) || seen[r.System+name] {
				continue
			}
			seen[r.System+name] = true
			l := Line{Name: r.System + ": " + name}
			for _, p := range r.Series {
				l.Points = append(l.Points, [2]float64{p.At, float64(p.Done)})
			}
			lines = append(lines, l)
		}
		if len(lines) > 0 {
			if err := writeSVG(filepath.Join(dir, sc+"-over-time.svg"), sc+": jobs completed per second", "seconds", "jobs/s", lines); err != nil {
				return err
			}
		}
	}
	// Drain throughput against kept history and waiting backlog.
	for _, axis := range []struct{ file, prefix, label string }{
		{"drain-vs-history.svg", "drain, %d finished kept", "finished jobs kept"},
		{"drain-vs-backlog.svg", "drain, %d waiting", "jobs waiting"},
	} {
		var lines []Line
		for _, sys := range []string{a, b} {
			l := Line{Name: sys}
			for _, c := range compare(results, a, b) {
				var size float64
				if c.scenario == "drain, 1000 workers" {
					size = 0
				} else if n, err := fmt.Sscanf(c.scenario, axis.prefix, new(int)); n != 1 || err != nil {
					continue
				} else {
					var v int
					fmt.Sscanf(c.scenario, axis.prefix, &v)
					size = float64(v)
				}
				r := c.a
				if sys == b {
					r = c.b
				}
				if r.PerSec > 0 {
					l.Points = append(l.Points, [2]float64{size, r.PerSec})
				}
			}
			slices.SortFunc(l.Points, func(x, y [2]float64) int { return int(math.Copysign(1, x[0]-y[0])) })
			if len(l.Points) > 1 {
				lines = append(lines, l)
			}
		}
		if len(lines) > 0 {
			if err := writeSVG(filepath.Join(dir, axis.file), "drain, 1000 workers: jobs/s against "+axis.label, axis.label, "jobs/s", lines); err != nil {
				return err
			}
		}
	}
	return nil
}
