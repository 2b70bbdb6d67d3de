package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/readpast/readpast"
)

// ScheduleJob is the job a schedule's ticks enqueue, in wire form.
type ScheduleJob struct {
	Kind        string          `json:"kind"`
	Queue       string          `json:"queue"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int             `json:"priority"`
	Group       *string         `json:"group"`
	MaxAttempts int             `json:"max_attempts"`
}

// Schedule is the wire form of a schedule. Runs is set by GET
// /v1/schedules/{name} only: its latest runs, newest first.
type Schedule struct {
	Name      string                 `json:"name"`
	Cron      string                 `json:"cron"`
	TimeZone  string                 `json:"time_zone"`
	CatchUp   readpast.CatchUp       `json:"catch_up"`
	Paused    bool                   `json:"paused"`
	Job       ScheduleJob            `json:"job"`
	NextRunAt *time.Time             `json:"next_run_at"`
	LastRunAt *time.Time             `json:"last_run_at"`
	LastJobID *int64                 `json:"last_job_id"`
	CreatedAt time.Time              `json:"created_at"`
	UpdatedAt time.Time              `json:"updated_at"`
	Runs      []readpast.ScheduleRun `json:"runs,omitempty"`
}

// NewSchedule converts a stored schedule to its wire form.
func NewSchedule(sc *readpast.Schedule) Schedule {
	w := Schedule{
		Name: sc.Name, Cron: sc.Cron, TimeZone: sc.TimeZone, CatchUp: sc.CatchUp, Paused: sc.Paused,
		Job: ScheduleJob{
			Kind: sc.Job.Kind, Queue: sc.Job.Queue, Payload: sc.Job.Payload, Priority: sc.Job.Priority,
			MaxAttempts: sc.Job.MaxAttempts,
		},
		NextRunAt: utcPtr(sc.NextRunAt), LastRunAt: utcPtr(sc.LastRunAt), LastJobID: sc.LastJobID,
		CreatedAt: sc.CreatedAt.UTC(), UpdatedAt: sc.UpdatedAt.UTC(),
	}
	if sc.Job.Group != "" {
		g := sc.Job.Group
		w.Job.Group = &g
	}
	if len(w.Job.Payload) == 0 {
		w.Job.Payload = json.RawMessage("{}")
	}
	return w
}

// SchedulesResponse is the body of GET /v1/schedules.
type SchedulesResponse struct {
	Schedules []Schedule `json:"schedules"`
}

// PutScheduleRequest is the body of PUT /v1/schedules/{name}.
type PutScheduleRequest struct {
	Cron     string          `json:"cron"`
	TimeZone *string         `json:"time_zone,omitempty"`
	CatchUp  *string         `json:"catch_up,omitempty"`
	Paused   *bool           `json:"paused,omitempty"`
	Job      json.RawMessage `json:"job"`
}

// ScheduleJobRequest is the job of a PutScheduleRequest.
type ScheduleJobRequest struct {
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Queue       string          `json:"queue,omitempty" empty:"no"`
	Priority    *int            `json:"priority,omitempty"`
	MaxAttempts *int            `json:"max_attempts,omitempty"`
	Group       *string         `json:"group,omitempty"`
}

// decodePutSchedule decodes the body of PUT /v1/schedules/{name}.
func decodePutSchedule(name string, body []byte, now time.Time) (readpast.ScheduleParams, *apiError) {
	var req PutScheduleRequest
	if ae := decodeObject(body, &req, ""); ae != nil {
		return readpast.ScheduleParams{}, ae
	}
	if len(req.Job) == 0 || string(req.Job) == "null" {
		return readpast.ScheduleParams{}, fieldError("job", "is required")
	}
	var jr ScheduleJobRequest
	if ae := decodeObject(req.Job, &jr, "job."); ae != nil {
		return readpast.ScheduleParams{}, ae
	}
	job, ae := EnqueueRequest{Kind: jr.Kind, Payload: jr.Payload, Queue: jr.Queue, Priority: jr.Priority,
		MaxAttempts: jr.MaxAttempts, Group: jr.Group}.toParams(now, "job.")
	if ae != nil {
		return readpast.ScheduleParams{}, ae
	}
	job.RunAt = time.Time{}
	p := readpast.ScheduleParams{Name: name, Cron: req.Cron, Job: job, Paused: req.Paused}
	if req.TimeZone != nil {
		if *req.TimeZone == "" {
			return p, fieldError("time_zone", "is empty; leave it out for UTC")
		}
		p.TimeZone = *req.TimeZone
	}
	if req.CatchUp != nil {
		if *req.CatchUp == "" {
			return p, fieldError("catch_up", "must be skip or once")
		}
		p.CatchUp = readpast.CatchUp(*req.CatchUp)
	}
	if _, _, err := p.Normalize(now); err != nil {
		var fe *readpast.FieldError
		if errors.As(err, &fe) {
			return p, fromFieldError(fe, nil)
		}
		return p, fieldError("", "%v", err)
	}
	return p, nil
}

// ParsePutSchedule decodes and validates the body of PUT
// /v1/schedules/{name} as the server does; the error names the field.
func ParsePutSchedule(name string, body []byte, now time.Time) (readpast.ScheduleParams, error) {
	p, ae := decodePutSchedule(name, body, now)
	if ae != nil {
		return p, ae
	}
	return p, nil
}

// scheduleName is the {name} path value; the error is a 404 for a name no
// schedule can have.
func scheduleName(r *http.Request) (string, *apiError) {
	name := r.PathValue("name")
	if name == "" || len(name) > readpast.MaxNameLen || strings.ContainsAny(name, " \t\r\n") || !utf8.ValidString(name) {
		return "", &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "schedule not found"}
	}
	return name, nil
}

func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) {
	scs, err := s.store.ListSchedules(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := SchedulesResponse{Schedules: make([]Schedule, 0, len(scs))}
	for _, sc := range scs {
		out.Schedules = append(out.Schedules, NewSchedule(sc))
	}
	s.writeJSON(w, r, http.StatusOK, out)
}

func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) {
	name, ae := scheduleName(r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	sc, err := s.store.GetSchedule(r.Context(), name)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	runs, err := s.store.ScheduleRuns(r.Context(), name, readpast.ScheduleRunsKept)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := NewSchedule(sc)
	out.Runs = runs
	s.writeJSON(w, r, http.StatusOK, out)
}

func (s *server) putSchedule(w http.ResponseWriter, r *http.Request) {
	body, ae := s.readBody(w, r)
	if ae != nil {
		s.writeError(w, r, ae)
		return
	}
	p, ae := decodePutSchedule(r.PathValue("name"), body, s.now())
	if ae != nil {
		if ae.Field == "name" {
			ae.Message = "the schedule name in the path " + ae.Message
		}
		s.writeError(w, r, ae)
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	sc, created, err := s.store.PutSchedule(ctx, p)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, createdStatus(created), NewSchedule(sc))
}

// createdStatus is a PUT's status: 201 when it created the resource, 200
// when it replaced one.
func createdStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	deleteBy(s, w, r, scheduleName, s.store.DeleteSchedule)
}

func (s *server) pauseSchedule(w http.ResponseWriter, r *http.Request)  { s.setPaused(w, r, true) }
func (s *server) resumeSchedule(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

// setPaused serves POST /v1/schedules/{name}/pause and /resume, which
// take no body (or an empty object).
func (s *server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	name, ok := s.scheduleAction(w, r)
	if !ok {
		return
	}
	ctx, cancel := writeContext(r)
	defer cancel()
	sc, err := s.store.PauseSchedule(ctx, name, paused)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, NewSchedule(sc))
}

// scheduleAction reads what an action on a schedule takes, its name from
// the path and no body (or an empty object), and answers the error itself
// when either is wrong (ok false).
func (s *server) scheduleAction(w http.ResponseWriter, r *http.Request) (name string, ok bool) {
	name, ae := scheduleName(r)
	if ae == nil {
		var body []byte
		if body, ae = s.readBody(w, r); ae == nil {
			ae = decodeEmpty(body)
		}
	}
	if ae != nil {
		s.writeError(w, r, ae)
		return "", false
	}
	return name, true
}
