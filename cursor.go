package readpast

import (
	"math"
	"strconv"
)

// A listing cursor is the id of the last job returned, as a decimal string;
// pages run newest (highest id) first.

// EncodeCursor makes the cursor that continues after job id.
func EncodeCursor(id int64) string { return strconv.FormatInt(id, 10) }

// DecodeCursor returns the id a cursor continues after.
func DecodeCursor(c string) (int64, error) {
	id, err := strconv.ParseInt(c, 10, 64)
	if err != nil || id < 1 {
		return 0, invalid("cursor", "malformed cursor")
	}
	return id, nil
}

// Before is the id a page of p starts below: the cursor's, or above every
// id when p has none. p must be normalized (ListParams.Normalize, which
// rejects a malformed cursor).
func (p ListParams) Before() int64 {
	if p.Cursor == "" {
		return math.MaxInt64
	}
	id, _ := DecodeCursor(p.Cursor)
	return id
}
