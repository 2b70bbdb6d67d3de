package dashboard

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/readpast/readpast"
)

// The charts are inline SVG drawn here: a viewBox of chartW by chartH
// units that scales to the width of its box, the plot inside the margins.
const (
	chartW     = 480
	chartH     = 200
	plotLeft   = 52
	plotRight  = 8
	plotTop    = 10
	plotBottom = 26
	slots      = int(window / time.Minute)
)

// chart is what the chart template draws.
type chart struct {
	// W and H are the viewBox's size.
	W, H float64
	// PlotEnd is the right edge of the plot, YLabelX where the y labels
	// end, XLabelY the baseline of the x labels, MidX and MidY the middle
	// of the plot.
	PlotEnd, YLabelX, XLabelY, MidX, MidY float64
	// Label says what the chart shows, for screen readers (aria-label).
	Label string
	// Empty is shown over the plot when there is nothing to draw.
	Empty        string
	PlotX, PlotY float64
	PlotW, PlotH float64
	YTicks       []tick
	XTicks       []tick
	Bars         []bar
	Lines        []line
	Dots         []dot
	Legend       []legendItem
	Columns      []string
	Table        [][]string
}

type tick struct {
	Pos   float64
	Label string
	// Anchor aligns an x label: start, middle or end.
	Anchor string
}

type bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type line struct {
	Class  string
	Points string
}

type dot struct {
	X, Y  float64
	Class string
	Title string
}

type legendItem struct {
	Class, Label string
}

// newChart makes an empty chart with its x axis: one slot per minute from
// since, labelled in minutes before now.
func newChart(label string) chart {
	c := chart{Label: label, W: chartW, H: chartH, PlotX: plotLeft, PlotY: plotTop,
		PlotW: chartW - plotLeft - plotRight, PlotH: chartH - plotTop - plotBottom}
	c.PlotEnd, c.YLabelX, c.XLabelY = c.PlotX+c.PlotW, c.PlotX-6, chartH-8
	c.MidX, c.MidY = c.PlotX+c.PlotW/2, c.PlotY+c.PlotH/2
	for _, back := range []int{60, 45, 30, 15, 0} {
		t := tick{Pos: c.slotX(slots - back), Label: fmt.Sprintf("−%d min", back), Anchor: "middle"}
		if back == 0 {
			t.Label, t.Anchor = "now", "end"
		}
		c.XTicks = append(c.XTicks, t)
	}
	return c
}

// slotX is the x of the left edge of slot i (0 to slots).
func (c *chart) slotX(i int) float64 { return round1(c.PlotX + c.PlotW*float64(i)/float64(slots)) }

// valueY is the y of value v on a scale from 0 to top.
func (c *chart) valueY(v, top float64) float64 {
	return round1(c.PlotY + c.PlotH - c.PlotH*v/top)
}

// yAxis adds about four ticks from 0 to the returned top, which is at
// least v; label formats a tick's value. Counts (integers) keep whole
// steps.
func (c *chart) yAxis(v float64, integer bool, label func(float64) string) float64 {
	step := niceStep(v / 4)
	if integer {
		step = max(1, math.Ceil(step))
	}
	top := step * math.Max(1, math.Ceil(v/step))
	for y := 0.0; y <= top*1.0001; y += step {
		c.YTicks = append(c.YTicks, tick{Pos: c.valueY(y, top), Label: label(y)})
	}
	return top
}

// niceStep rounds v up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p*1.0000001 {
			return m * p
		}
	}
	return 10 * p
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// bySlot places minutes in their slots from since; minutes outside the
// window are left out.
func bySlot(since time.Time, minutes []readpast.ActivityMinute) [slots]*readpast.ActivityMinute {
	var out [slots]*readpast.ActivityMinute
	for i := range minutes {
		m := &minutes[i]
		if s := int(m.Minute.Sub(since) / time.Minute); s >= 0 && s < slots {
			out[s] = m
		}
	}
	return out
}

// throughputChart draws the jobs completed and failed each minute as
// stacked bars.
func throughputChart(since time.Time, minutes []readpast.ActivityMinute) chart {
	c := newChart("")
	c.Legend = []legendItem{{"succeeded", "completed"}, {"failed", "failed"}}
	c.Columns = []string{"Minute (UTC)", "Completed", "Failed"}
	slot := bySlot(since, minutes)
	var peak, done, failed int64
	for _, m := range slot {
		if m != nil {
			peak = max(peak, m.Succeeded+m.Failed)
			done += m.Succeeded
			failed += m.Failed
		}
	}
	c.Label = fmt.Sprintf("Jobs completed and failed per minute over the last hour: %s completed, %s failed, at most %s in a minute.",
		count(done), count(failed), count(peak))
	if peak == 0 {
		c.Empty = "No job finished in the last hour."
	}
	top := c.yAxis(float64(peak), true, func(v float64) string { return count(int64(v)) })
	w := c.PlotW / float64(slots)
	for i, m := range slot {
		if m == nil || m.Succeeded+m.Failed == 0 {
			continue
		}
		x := round1(c.slotX(i) + w*0.1)
		at := since.Add(time.Duration(i) * time.Minute).UTC().Format("15:04")
		title := fmt.Sprintf("%s UTC: %s completed, %s failed", at, count(m.Succeeded), count(m.Failed))
		base := c.valueY(0, top)
		ys := c.valueY(float64(m.Succeeded), top)
		yf := c.valueY(float64(m.Succeeded+m.Failed), top)
		if m.Succeeded > 0 {
			c.Bars = append(c.Bars, bar{X: x, Y: ys, W: round1(w * 0.8), H: round1(base - ys), Class: "succeeded", Title: title})
		}
		if m.Failed > 0 {
			c.Bars = append(c.Bars, bar{X: x, Y: yf, W: round1(w * 0.8), H: round1(ys - yf), Class: "failed", Title: title})
		}
		c.Table = append(c.Table, []string{at, count(m.Succeeded), count(m.Failed)})
	}
	return c
}

// latencyChart draws the p50 and p99 enqueue-to-start latency of each
// minute as two lines, broken where no job started.
func latencyChart(since time.Time, minutes []readpast.ActivityMinute) chart {
	c := newChart("")
	c.Legend = []legendItem{{"p50", "p50"}, {"p99", "p99"}}
	c.Columns = []string{"Minute (UTC)", "Started", "p50", "p99"}
	slot := bySlot(since, minutes)
	var peak time.Duration
	var started int64
	for _, m := range slot {
		if m != nil && m.Started > 0 {
			peak = max(peak, m.LatencyP99)
			started += m.Started
		}
	}
	c.Label = fmt.Sprintf("Enqueue-to-start latency per minute over the last hour, p50 and p99: %s jobs started, highest p99 %s.",
		count(started), duration(peak))
	if started == 0 {
		c.Empty = "No job started in the last hour."
	}
	top := c.yAxis(peak.Seconds(), false, func(v float64) string { return duration(time.Duration(v * float64(time.Second))) })
	w := c.PlotW / float64(slots)
	for _, series := range []struct {
		class string
		value func(*readpast.ActivityMinute) time.Duration
	}{
		{"p50", func(m *readpast.ActivityMinute) time.Duration { return m.LatencyP50 }},
		{"p99", func(m *readpast.ActivityMinute) time.Duration { return m.LatencyP99 }},
	} {
		var pts []string
		flush := func() {
			if len(pts) > 1 {
				c.Lines = append(c.Lines, line{Class: series.class, Points: strings.Join(pts, " ")})
			}
			pts = nil
		}
		for i, m := range slot {
			if m == nil || m.Started == 0 {
				flush()
				continue
			}
			x := round1(c.slotX(i) + w/2)
			y := c.valueY(series.value(m).Seconds(), top)
			pts = append(pts, fmt.Sprintf("%g,%g", x, y))
			at := since.Add(time.Duration(i) * time.Minute).UTC().Format("15:04")
			c.Dots = append(c.Dots, dot{X: x, Y: y, Class: series.class,
				Title: fmt.Sprintf("%s UTC: %s %s (%s started)", at, series.class, duration(series.value(m)), count(m.Started))})
		}
		flush()
	}
	for i, m := range slot {
		if m != nil && m.Started > 0 {
			at := since.Add(time.Duration(i) * time.Minute).UTC().Format("15:04")
			c.Table = append(c.Table, []string{at, count(m.Started), duration(m.LatencyP50), duration(m.LatencyP99)})
		}
	}
	return c
}
