package benchkit

import (
	"fmt"
	"html"
	"math"
	"os"
	"strings"
)

// Line is one series of a plot.
type Line struct {
	Name   string
	Points [][2]float64 // x, y
}

// writeSVG writes a plain line chart of lines to path: axes from 0 to the
// largest x and y, five ticks each, a legend of one line a series (the
// names are long: "readpast/postgres: paced 10000/s, snapshot held").
func writeSVG(path, title, xLabel, yLabel string, lines []Line) error {
	const w, left, right, top, plotH = 760.0, 70.0, 20.0, 40.0, 300.0
	bottom := 56 + 16*float64(len(lines))
	h := top + plotH + bottom
	var maxX, maxY float64
	for _, l := range lines {
		for _, p := range l.Points {
			maxX, maxY = math.Max(maxX, p[0]), math.Max(maxY, p[1])
		}
	}
	if maxX == 0 {
		maxX = 1
	}
	if maxY == 0 {
		maxY = 1
	}
	x := func(v float64) float64 { return left + v/maxX*(w-left-right) }
	y := func(v float64) float64 { return h - bottom - v/maxY*(h-top-bottom) }
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="22" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n",
		left, y(0), x(maxX), y(0), left, y(0), left, y(maxY))
	for i := 0; i <= 5; i++ {
		vx, vy := maxX*float64(i)/5, maxY*float64(i)/5
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x(vx), y(0)+16, short(vx))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(vy)+4, short(vy))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, (left+w-right)/2, h-bottom+34, html.EscapeString(xLabel))
	fmt.Fprintf(&b, `<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`+"\n", (top+h-bottom)/2, (top+h-bottom)/2, html.EscapeString(yLabel))
	for i, l := range lines {
		c := colors[i%len(colors)]
		var pts []string
		for _, p := range l.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", c, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="3" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			left, h-bottom+46+float64(i)*16, c, left+16, h-bottom+51+float64(i)*16, html.EscapeString(l.Name))
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// short formats an axis value: 12k, 1.5M.
func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}
