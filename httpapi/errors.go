package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/readpast/readpast"
)

// Error codes carried in ErrorDetail.Code. Clients branch on these.
const (
	// CodeMalformedJSON: the body is not one JSON object (HTTP 400).
	CodeMalformedJSON = "malformed_json"
	// CodeInvalidField: a field is unknown, has the wrong type, is missing
	// or is out of range; ErrorDetail.Field names it (HTTP 400).
	CodeInvalidField = "invalid_field"
	// CodeTooLarge: the body exceeds the server's limit (HTTP 413).
	CodeTooLarge = "body_too_large"
	// CodeBatchTooLarge: a batch holds more jobs than allowed (HTTP 413).
	CodeBatchTooLarge = "batch_too_large"
	// CodeUnauthorized: the bearer token is missing or unknown (HTTP 401).
	CodeUnauthorized = "unauthorized"
	// CodeForbidden: a read-only token was used for a write (HTTP 403).
	CodeForbidden = "forbidden"
	// CodeCrossOrigin: a browser sent a cross-origin request that could
	// change something (HTTP 403).
	CodeCrossOrigin = "cross_origin"
	// CodeHostNotAllowed: authentication is off and the Host header names
	// neither a loopback host nor an allowed one (HTTP 403).
	CodeHostNotAllowed = "host_not_allowed"
	// CodeTooManyAttempts: the client address presented too many
	// credentials that were not valid; the request was refused before its
	// token was checked, and Retry-After says when to try again (HTTP 429).
	CodeTooManyAttempts = "too_many_attempts"
	// CodeNotFound: no such job, schedule or limit, or no such route (HTTP
	// 404); the message says which.
	CodeNotFound = "not_found"
	// CodeMethodNotAllowed: the route exists for other methods (HTTP 405).
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeStaleToken: the claim token is not the job's current claim;
	// nothing changed (HTTP 409).
	CodeStaleToken = "stale_token"
	// CodeInvalidState: the job's state does not allow the operation;
	// nothing changed (HTTP 409).
	CodeInvalidState = "invalid_state"
	// CodeSnoozeLimit: the job was snoozed as many times as the server
	// allows (its --max-snoozes); nothing changed, and the job is still
	// running under the claim (HTTP 409).
	CodeSnoozeLimit = "snooze_limit"
	// CodeIdempotencyMismatch: an enqueue's Idempotency-Key is held by a
	// job that another request made, whose field (ErrorDetail.Field)
	// differs from this one's; nothing changed (HTTP 422).
	CodeIdempotencyMismatch = "idempotency_mismatch"
	// CodeUnavailable: the store cannot be reached (HTTP 503).
	CodeUnavailable = "unavailable"
	// CodeInternal: an unexpected server error (HTTP 500).
	CodeInternal = "internal"
)

// apiError is an error with the HTTP status and body it is reported as.
type apiError struct {
	Status  int
	Code    string
	Message string
	Field   string
	// cause is logged for 5xx errors, never sent.
	cause error
}

func (e *apiError) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

func (e *apiError) Unwrap() error { return e.cause }

// fieldError is a 400 naming the field at fault.
func fieldError(field, format string, args ...any) *apiError {
	return &apiError{
		Status:  http.StatusBadRequest,
		Code:    CodeInvalidField,
		Field:   field,
		Message: fmt.Sprintf(format, args...),
	}
}

// fromFieldError turns a *readpast.FieldError into a 400, renaming its field
// with rename when rename is not nil.
func fromFieldError(fe *readpast.FieldError, rename func(string) string) *apiError {
	field := fe.Field
	if rename != nil {
		field = rename(field)
	}
	return &apiError{
		Status:  http.StatusBadRequest,
		Code:    CodeInvalidField,
		Field:   field,
		Message: fe.Message,
	}
}

// retryAfterSeconds is the Retry-After of a 503 response.
const retryAfterSeconds = "2"

// storeError maps an error from the store to its response.
func (s *server) storeError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *readpast.FieldError
	switch {
	case errors.As(err, &fe):
		return fromFieldError(fe, nil)
	case errors.Is(err, readpast.ErrScheduleNotFound):
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "schedule not found"}
	case errors.Is(err, readpast.ErrLimitNotFound):
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "limit not found"}
	case errors.Is(err, readpast.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "job not found"}
	case errors.Is(err, readpast.ErrStaleToken):
		return &apiError{Status: http.StatusConflict, Code: CodeStaleToken,
			Message: "the token is not this job's current claim: the job is not running under it (the token is wrong, or the claim ended: lease expired, job cancelled or finished); nothing changed"}
	case errors.Is(err, readpast.ErrInvalidState):
		return &apiError{Status: http.StatusConflict, Code: CodeInvalidState, Message: stateMessage(err)}
	case s.unavailable(err):
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the database is unavailable; try again later", cause: err}
	case errors.Is(err, context.Canceled):
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "the request was cancelled; try again", cause: err}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: CodeInternal,
		Message: "internal error", cause: err}
}

// unavailabilityReporter is implemented by stores that can tell their
// "cannot reach the database" errors apart (postgres.Store and
// sqlite.Store do).
type unavailabilityReporter interface {
	IsUnavailable(err error) bool
}

// unavailable reports whether err means the database could not be reached
// or did not answer in time: readpast.ErrUnavailable, what the store
// reports through IsUnavailable, a timeout, or a network error.
func (s *server) unavailable(err error) bool {
	if errors.Is(err, readpast.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if u, ok := s.store.(unavailabilityReporter); ok && u.IsUnavailable(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF)
}

// stateMessage says why err, an ErrInvalidState, refused an operation:
// what the store said (such as "job 7 is succeeded", or the job holding
// a unique key a retry needs), and that nothing changed.
func stateMessage(err error) string {
	why, ok := strings.CutSuffix(err.Error(), ": "+readpast.ErrInvalidState.Error())
	if !ok || why == "" {
		return "the job's state does not allow this operation; nothing changed"
	}
	return why + ": the operation does not apply; nothing changed"
}
