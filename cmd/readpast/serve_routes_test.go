package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWithDashboardRoutes: the API's paths, GET /v1 (the server's info)
// included, reach the API; every other path reaches the dashboard. GET
// /v1 used to be redirected to /v1/, which the API does not serve.
func TestWithDashboardRoutes(t *testing.T) {
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(name)) })
	}
	h := withDashboard(named("api"), named("dashboard"))
	for path, want := range map[string]string{
		"/v1": "api", "/v1/jobs": "api", "/v1/openapi.json": "api", "/healthz": "api", "/readyz": "api",
		"/metrics": "api", "/": "dashboard", "/jobs": "dashboard", "/queues/q": "dashboard", "/v1x": "dashboard",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK || rec.Body.String() != want {
			t.Errorf("GET %s: %d %q, want 200 from the %s", path, rec.Code, rec.Body.String(), want)
		}
	}
}
