// Package cursor encodes the cursors of job listings: a listing cursor is
// the id of the last job returned, as a decimal string, and pages run
// newest (highest id) first. The root package validates cursors with it
// (ListParams.Normalize); the stores and the HTTP API make them.
package cursor

import "strconv"

// Encode makes the cursor that continues after job id.
func Encode(id int64) string { return strconv.FormatInt(id, 10) }

// Decode returns the id a cursor continues after, and whether c is a
// well-formed cursor (a decimal id of at least 1).
func Decode(c string) (int64, bool) {
	id, err := strconv.ParseInt(c, 10, 64)
	if err != nil || id < 1 {
		return 0, false
	}
	return id, true
}
