package readpast

import "github.com/readpast/readpast/internal/cursor"

// A listing cursor (ListParams.Cursor, ListResult.Next, SearchResult.Next)
// is the id of the last job returned, as a decimal string; pages run
// newest (highest id) first. Package internal/cursor makes and reads them.

// decodeCursor returns the id a cursor continues after, or a *FieldError
// for field "cursor" when c is malformed.
func decodeCursor(c string) (int64, error) {
	id, ok := cursor.Decode(c)
	if !ok {
		return 0, invalid("cursor", "malformed cursor")
	}
	return id, nil
}
