package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// count writes n with thousands separators: 1,234,567.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}

// duration writes d short, with two or three significant digits: 850 µs,
// 12 ms, 1.5 s, 3 min 20 s, 2 h 5 min.
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return trimFloat(float64(d)/float64(time.Millisecond)) + " ms"
	case d < time.Minute:
		return trimFloat(d.Seconds()) + " s"
	case d < time.Hour:
		m := int(d / time.Minute)
		if s := int((d % time.Minute) / time.Second); s > 0 {
			return fmt.Sprintf("%d min %d s", m, s)
		}
		return fmt.Sprintf("%d min", m)
	case d < 48*time.Hour:
		h := int(d / time.Hour)
		if m := int((d % time.Hour) / time.Minute); m > 0 {
			return fmt.Sprintf("%d h %d min", h, m)
		}
		return fmt.Sprintf("%d h", h)
	}
	return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
}

// trimFloat writes v with up to three significant digits and no trailing
// zeros: 1.5, 12.3, 250.
func trimFloat(v float64) string {
	digits := 2 - int(math.Floor(math.Log10(math.Abs(v))))
	if digits < 0 {
		digits = 0
	}
	return strconv.FormatFloat(roundTo(v, digits), 'f', -1, 64)
}

func roundTo(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// relative writes how far t is from now: "3 min ago", "in 20 s", "now".
func relative(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return duration(d.Truncate(time.Second)) + " ago"
	}
	return "in " + duration((-d).Truncate(time.Second))
}

// timeView is a time as pages show it: absolute in UTC, and relative to
// the page's time.
type timeView struct {
	ISO, Abs, Rel string
}

func when(t, now time.Time) timeView {
	return timeView{ISO: t.UTC().Format(time.RFC3339Nano), Abs: timestamp(t), Rel: relative(t, now)}
}

// timestamp writes t in UTC to the millisecond.
func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") }

// maxShown bounds the bytes of a payload, result or stack a page shows;
// the rest is left out, with a note.
const maxShown = 256 << 10

// shownText is a long text as a page shows it.
type shownText struct {
	Text string
	// Cut is how many bytes were left out.
	Cut int64
}

// prettyJSON indents a JSON document for reading, and cuts it at maxShown.
func prettyJSON(raw json.RawMessage) shownText {
	var b bytes.Buffer
	if len(raw) <= maxShown && json.Indent(&b, raw, "", "  ") == nil {
		raw = b.Bytes()
	}
	return cutText(string(raw), maxShown)
}

// cutText cuts s to at most n bytes, at a rune boundary.
func cutText(s string, n int) shownText {
	if len(s) <= n {
		return shownText{Text: s}
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return shownText{Text: s[:cut], Cut: int64(len(s) - cut)}
}

// short cuts s to n runes, with an ellipsis when cut, for table cells.
func short(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
