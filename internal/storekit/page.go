package storekit

import (
	"math"

	"github.com/readpast/readpast"
	"github.com/readpast/readpast/internal/cursor"
)

// PageBelow is the id a page of p starts below: the cursor's, or above
// every id when p has none. p must be normalized (ListParams.Normalize,
// which rejects a malformed cursor).
func PageBelow(p readpast.ListParams) int64 {
	if p.Cursor == "" {
		return math.MaxInt64
	}
	id, _ := cursor.Decode(p.Cursor)
	return id
}

// SearchPage assembles a SearchResult, for Inspector implementations that
// search in two steps. matches holds up to limit+1 matching jobs among the
// newest scan jobs below the cursor, newest first. When it holds more than
// limit, the page is full and continues after its last job. Otherwise
// examine, called then only, reports how many jobs the search examined
// (at most scan) and the lowest id among them: fewer than scan means the
// search reached the oldest job.
func SearchPage(matches []*readpast.Job, limit, scan int, examine func() (examined int, lowest int64, err error)) (readpast.SearchResult, error) {
	if len(matches) > limit {
		page := matches[:limit]
		return readpast.SearchResult{Jobs: page, Next: cursor.Encode(page[limit-1].ID)}, nil
	}
	res := readpast.SearchResult{Jobs: matches}
	if res.Jobs == nil {
		res.Jobs = []*readpast.Job{}
	}
	examined, lowest, err := examine()
	if err != nil {
		return readpast.SearchResult{}, err
	}
	if examined >= scan && lowest > 1 {
		res.Next = cursor.Encode(lowest)
		res.Partial = true
	}
	return res, nil
}
