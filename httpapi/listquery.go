package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/readpast/readpast"
)

// listQueryParams are the query parameters GET /v1/jobs understands.
var listQueryParams = []string{"queue", "state", "kind", "group", "tag", "limit", "cursor", "summary"}

// listArgs is a decoded list query.
type listArgs struct {
	Params readpast.ListParams
	// Summary lists jobs without payload, result and errors.
	Summary bool
}

// decodeListQuery decodes the query of GET /v1/jobs.
func decodeListQuery(rawQuery string) (listArgs, *apiError) {
	p, ae := decodeListFilter(rawQuery)
	if ae != nil {
		return listArgs{}, ae
	}
	q, _ := url.ParseQuery(rawQuery) // decodeListFilter parsed it
	var summary bool
	switch q.Get("summary") {
	case "", "false":
	case "true":
		summary = true
	default:
		return listArgs{}, fieldError("summary", "must be true or false")
	}
	return listArgs{Params: p, Summary: summary}, nil
}

// decodeListFilter decodes the filter and paging parameters of GET /v1/jobs.
func decodeListFilter(rawQuery string) (readpast.ListParams, *apiError) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return readpast.ListParams{}, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidField, Message: "malformed query string"}
	}
	for k, vs := range q {
		if !slices.Contains(listQueryParams, k) {
			return readpast.ListParams{}, fieldError(k, "unknown query parameter")
		}
		if len(vs) > 1 {
			return readpast.ListParams{}, fieldError(k, "given more than once")
		}
		if vs[0] == "" {
			return readpast.ListParams{}, fieldError(k, "is empty; leave the parameter out to not filter by it")
		}
	}
	p := readpast.ListParams{
		Queue:  q.Get("queue"),
		State:  readpast.JobState(q.Get("state")),
		Kind:   q.Get("kind"),
		Group:  q.Get("group"),
		Tag:    q.Get("tag"),
		Cursor: q.Get("cursor"),
	}
	for _, f := range []struct{ name, v string }{{"queue", p.Queue}, {"kind", p.Kind}, {"group", p.Group}, {"tag", p.Tag}} {
		if len(f.v) > readpast.MaxNameLen {
			return readpast.ListParams{}, fieldError(f.name, "longer than %d bytes", readpast.MaxNameLen)
		}
	}
	if s := q.Get("limit"); s != "" {
		n, ok := ParseID(s)
		if !ok || n > 1000 {
			return readpast.ListParams{}, fieldError("limit", "must be between 1 and 1000")
		}
		p.Limit = int(n)
	}
	if p.Cursor != "" {
		if _, ok := ParseID(p.Cursor); !ok {
			return readpast.ListParams{}, fieldError("cursor", "malformed cursor")
		}
	}
	p, err = p.Normalize()
	if err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) {
			return readpast.ListParams{}, fromFieldError(fe, nil)
		}
		return readpast.ListParams{}, &apiError{Status: http.StatusBadRequest, Code: CodeInvalidField, Message: err.Error()}
	}
	return p, nil
}

// parseID parses a job id from the path.
func parseID(s string) (int64, *apiError) {
	id, ok := ParseID(s)
	if !ok {
		return 0, fieldError("id", "must be a positive integer without sign or leading zeros")
	}
	return id, nil
}

// ParseID parses a job id as the API writes them: decimal digits, no
// sign, no leading zeros, at least 1. "+1", "01" and " 1" are not ids.
func ParseID(s string) (int64, bool) {
	if s == "" || s[0] == '0' || strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}
