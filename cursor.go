package readpast

import (
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
