package readpast

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// CheckJSON reports whether b is a JSON value every store keeps as it is,
// by the rules of payloads and results (see EnqueueParams.Payload): valid
// JSON in valid UTF-8, no \u0000 escape, no unpaired UTF-16 surrogate
// escape, numbers PostgreSQL can hold, no object giving one key twice.
// The error is a *FieldError for field.
func CheckJSON(field string, b []byte) error { return checkJSON(field, b) }

// maxNumberGrowth bounds how many bytes a JSON value may grow by when
// PostgreSQL writes its numbers out in full (see checkJSON).
const maxNumberGrowth = 1 << 20

// Limits of PostgreSQL's numeric type, which jsonb stores numbers in.
const (
	pgMaxDigitWeight = 131071 // the leading digit's power of ten
	pgMaxScale       = 16383  // digits after the decimal point
)

// checkJSON reports whether b is a JSON value every store keeps as it is:
// valid JSON in valid UTF-8, with no \u0000 escape and no unpaired UTF-16
// surrogate escape (\ud800 alone), which PostgreSQL's jsonb rejects, and
// with numbers jsonb can hold (at most 131072 digits before the decimal
// point and 16383 after). Numbers with large exponents are written out in
// full by PostgreSQL (1e300 becomes 301 digits), so the digits they would
// grow by, over the whole value, must stay under maxNumberGrowth. An
// object may not give one key twice: SQLite would keep both and jsonb the
// last. The error is a *FieldError for field.
func checkJSON(field string, b []byte) error {
	if !json.Valid(b) {
		return invalid(field, "not valid JSON")
	}
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return invalid(field, "not valid UTF-8 (byte %d)", i)
	}
	growth := 0
	var objs objectKeys
	if bytes.IndexByte(b, '{') >= 0 && bytes.IndexByte(b, ',') >= 0 { // else no object has two keys
		objs = objectKeys{on: true, frames: make([]keyFrame, 0, 16), keys: make([][]byte, 0, 64)}
	}
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '{' || c == '[':
			objs.open(c == '{')
		case c == '}' || c == ']':
			objs.close()
		case c == ',':
			objs.next()
		case c == '"':
			end, err := checkString(field, b, i+1)
			if err != nil {
				return err
			}
			if key, twice := objs.key(b[i : end+1]); twice {
				return invalid(field, "has the key %q twice in one object (PostgreSQL's jsonb would keep only the last); give each key once", key)
			}
			i = end
		case c == '-' || ('0' <= c && c <= '9'):
			end, grow, err := checkNumber(field, b, i)
			if err != nil {
				return err
			}
			if growth += grow; growth > maxNumberGrowth {
				return invalid(field, "numbers with large exponents (such as 1e300) would be written out with more than %d extra digits; send them as strings", maxNumberGrowth)
			}
			i = end - 1
		}
	}
	return nil
}

// checkString checks the escapes of the string that starts at b[i] (after
// its opening quote) in valid JSON, and returns the index of its closing
// quote.
func checkString(field string, b []byte, i int) (int, error) {
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i, nil
		case '\\':
			i++
			if b[i] != 'u' {
				continue
			}
			r := hex4(b[i+1 : i+5])
			i += 4
			switch {
			case r == 0:
				return 0, invalid(field, `contains \u0000, which PostgreSQL cannot store`)
			case 0xDC00 <= r && r <= 0xDFFF:
				return 0, invalid(field, `contains an unpaired UTF-16 surrogate escape \u%04x`, r)
			case 0xD800 <= r && r <= 0xDBFF:
				if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
					return 0, invalid(field, `contains an unpaired UTF-16 surrogate escape \u%04x`, r)
				}
				if lo := hex4(b[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
					return 0, invalid(field, `contains an unpaired UTF-16 surrogate escape \u%04x`, r)
				}
				i += 6
			}
		}
	}
	return i, nil
}

// hex4 decodes the four hex digits of a \u escape (valid JSON).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// checkNumber checks the number that starts at b[i] in valid JSON against
// PostgreSQL's numeric range. It returns the index just past the number
// and how many bytes longer the number is when written out in full.
func checkNumber(field string, b []byte, i int) (end, growth int, err error) {
	start := i
	if b[i] == '-' {
		i++
	}
	intStart := i
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	intDigits := b[intStart:i]
	var fracDigits []byte
	if i < len(b) && b[i] == '.' {
		i++
		fs := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		fracDigits = b[fs:i]
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if b[i] == '+' || b[i] == '-' {
			neg = b[i] == '-'
			i++
		}
		for ; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
			if exp < 1<<30 { // far beyond any limit below; no overflow
				exp = exp*10 + int(b[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	end = i
	outOfRange := func() error {
		return invalid(field, "number %.40s is out of the range PostgreSQL can store", b[start:end])
	}
	scale := max(len(fracDigits)-exp, 0)
	if scale > pgMaxScale {
		return 0, 0, outOfRange()
	}
	// The power of ten of the leading non-zero digit, if any.
	weight, nonZero := 0, false
	if t := bytes.TrimLeft(intDigits, "0"); len(t) > 0 {
		weight, nonZero = len(t)-1+exp, true
	} else if k := bytes.IndexFunc(fracDigits, func(r rune) bool { return r != '0' }); k >= 0 {
		weight, nonZero = -k-1+exp, true
	}
	if nonZero && weight > pgMaxDigitWeight {
		return 0, 0, outOfRange()
	}
	full := 1 // the integer part, at least "0"
	if nonZero && weight >= 0 {
		full = weight + 1
	}
	if scale > 0 {
		full += 1 + scale
	}
	if b[start] == '-' {
		full++
	}
	return end, max(full-(end-start), 0), nil
}

// objectKeys follows the objects and arrays that enclose a point of a
// valid JSON value, and the keys each enclosing object has given so far:
// one stack of keys, each object's after those of the objects around it.
type objectKeys struct {
	on     bool // off, its methods do nothing
	frames []keyFrame
	keys   [][]byte // decoded
}

// keyFrame is one enclosing object (or array, which holds no keys).
type keyFrame struct {
	object, wantKey bool
	start           int                 // where its keys start in keys
	set             map[string]struct{} // its keys, once past keySetAt
}

// keySetAt is how many keys an object gives before they go in a map.
const keySetAt = 16

// open enters an object or an array.
func (o *objectKeys) open(object bool) {
	if !o.on {
		return
	}
	o.frames = append(o.frames, keyFrame{object: object, wantKey: object, start: len(o.keys)})
}

// close leaves the innermost object or array, forgetting its keys.
func (o *objectKeys) close() {
	if !o.on {
		return
	}
	o.keys = o.keys[:o.frames[len(o.frames)-1].start]
	o.frames = o.frames[:len(o.frames)-1]
}

// next is a comma: in an object, a key comes next.
func (o *objectKeys) next() {
	if !o.on {
		return
	}
	if f := &o.frames[len(o.frames)-1]; f.object {
		f.wantKey = true
	}
}

// key is a string, quote to quote: when it is a key, key records it and
// reports whether its object gave it already (escapes decoded).
func (o *objectKeys) key(quoted []byte) (string, bool) {
	if !o.on || len(o.frames) == 0 || !o.frames[len(o.frames)-1].wantKey {
		return "", false
	}
	f := &o.frames[len(o.frames)-1]
	f.wantKey = false
	k := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(k, '\\') >= 0 {
		var s string
		if json.Unmarshal(quoted, &s) != nil {
			return "", false // checkJSON has checked the JSON
		}
		k = []byte(s)
	}
	if f.set != nil {
		if _, ok := f.set[string(k)]; ok {
			return string(k), true
		}
		f.set[string(k)] = struct{}{}
		return "", false
	}
	for _, seen := range o.keys[f.start:] {
		if bytes.Equal(seen, k) {
			return string(k), true
		}
	}
	o.keys = append(o.keys, k)
	if n := len(o.keys) - f.start; n > keySetAt {
		f.set = make(map[string]struct{}, 2*n)
		for _, seen := range o.keys[f.start:] {
			f.set[string(seen)] = struct{}{}
		}
		o.keys = o.keys[:f.start]
	}
	return "", false
}
