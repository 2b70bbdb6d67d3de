package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/readpast/readpast"
)

// DefaultMaxResponseBytes is the byte budget of a list or claim response
// when Config leaves it 0.
const DefaultMaxResponseBytes = 8 << 20

// jobOverhead is what a job costs besides its payload, result and errors,
// in memory and encoded (a generous estimate).
const jobOverhead = 512

// jobBytes estimates what job j takes in memory: its payload, result and
// errors, and the rest.
func jobBytes(j *readpast.Job) int {
	n := jobOverhead + len(j.Payload) + len(j.Result)
	for _, e := range j.Errors {
		n += len(e.Message) + len(e.Stack) + len(e.Worker) + 64
	}
	return n
}

// pager sizes the store calls of one list or claim response, and collects
// the encoded jobs, so that neither the rows one call loads nor the
// response exceed the byte budget by more than one job. The store cannot
// be asked for bytes, only for a number of jobs; so the first call asks
// for as many jobs as fit in the budget if each were as large as the
// largest request body the server accepts, and later calls for as many as
// fit if each were as large as the largest job seen so far, and one more
// each time: a call that comes back short needs no other, and without the
// one more, the first call of a claim under the default limits asked for
// a single job, so every claim that found one job made a second, empty,
// store call.
type pager struct {
	budget  int // bytes a response may hold
	worst   int // the largest job expected before one is seen
	largest int // the largest job seen so far
	buf     bytes.Buffer
	n       int  // jobs in buf
	full    bool // a job did not fit
}

func newPager(budget, worst int) *pager {
	p := &pager{budget: budget, worst: max(worst+jobOverhead, jobOverhead)}
	p.buf.WriteString(`{"jobs":[`)
	return p
}

// next is how many jobs the next store call should ask for, when want are
// still wanted: as many as fit in what is left of the budget at the
// estimated size, and one more, which may take the rows loaded over it by
// that one job.
func (p *pager) next(want int) int {
	est := p.worst
	if p.largest > 0 {
		est = p.largest
	}
	left := max(p.budget-p.buf.Len(), 0)
	return min(want, left/est+1)
}

// add encodes v, the wire form of job j, into the response unless the
// response holds a job already and v would take it over the budget. It
// reports whether v was added; once it was not, the response is full.
func (p *pager) add(j *readpast.Job, v any) (bool, error) {
	p.largest = max(p.largest, jobBytes(j))
	if p.full {
		return false, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false, fmt.Errorf("encode job %d: %w", j.ID, err)
	}
	if p.n > 0 && p.buf.Len()+len(b)+1 > p.budget {
		p.full = true
		return false, nil
	}
	if p.n > 0 {
		p.buf.WriteByte(',')
	}
	p.buf.Write(b)
	p.n++
	return true, nil
}

// writeList sends a list's response: the jobs and next_cursor, null when
// cursor is "".
func (p *pager) writeList(s *server, w http.ResponseWriter, r *http.Request, cursor string) {
	p.buf.WriteString(`],"next_cursor":`)
	if cursor == "" {
		p.buf.WriteString("null")
	} else {
		c, _ := json.Marshal(cursor)
		p.buf.Write(c)
	}
	p.buf.WriteString("}\n")
	s.writeBody(w, r, http.StatusOK, p.buf.Bytes())
}

// writeClaim sends a claim's response: the jobs and waited_seconds, how
// long the server held the request before the claim that took them
// began, in whole milliseconds rounded down. The jobs' leases began after
// that, so a worker that adds it to when it sent the claim never counts a
// lease to end later than it does, however long the claim waited.
func (p *pager) writeClaim(s *server, w http.ResponseWriter, r *http.Request, waited time.Duration) {
	fmt.Fprintf(&p.buf, `],"waited_seconds":%.3f}`+"\n", float64(waited.Milliseconds())/1000)
	s.writeBody(w, r, http.StatusOK, p.buf.Bytes())
}
