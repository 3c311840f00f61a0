package spokeprovider

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestFenceGuardsWritesOnly: reads always leave; a write leaves only if the fence allows it,
// which then counts it until it is answered; a refused write fails with the fence's error and
// never reaches the member.
func TestFenceGuardsWritesOnly(t *testing.T) {
	t.Parallel()
	refusedErr := errors.New("lease lost")
	for _, tc := range []struct {
		method  string
		allowed bool
		sent    bool
	}{
		{method: http.MethodGet, allowed: false, sent: true},
		{method: http.MethodHead, allowed: false, sent: true},
		{method: http.MethodPost, allowed: true, sent: true},
		{method: http.MethodPut, allowed: true, sent: true},
		{method: http.MethodPatch, allowed: true, sent: true},
		{method: http.MethodDelete, allowed: true, sent: true},
		{method: http.MethodPost, allowed: false, sent: false},
		{method: http.MethodPut, allowed: false, sent: false},
		{method: http.MethodPatch, allowed: false, sent: false},
		{method: http.MethodDelete, allowed: false, sent: false},
	} {
		sent, begun, ended := false, 0, 0
		f := &fence{
			next: roundTripperFunc(func(*http.Request) (*http.Response, error) {
				sent = true
				if begun != ended+1 && tc.method != http.MethodGet && tc.method != http.MethodHead {
					t.Errorf("%s sent outside a begun write", tc.method)
				}
				return httptest.NewRecorder().Result(), nil
			}),
			begin: func() (func(), error) {
				if !tc.allowed {
					return nil, refusedErr
				}
				begun++
				return func() { ended++ }, nil
			},
		}
		req := httptest.NewRequest(tc.method, "https://member/api/v1/namespaces/default/configmaps/app", nil)
		_, err := f.RoundTrip(req)
		if sent != tc.sent {
			t.Errorf("%s allowed=%v: sent %v, want %v", tc.method, tc.allowed, sent, tc.sent)
		}
		if !tc.sent && !errors.Is(err, refusedErr) {
			t.Errorf("%s refused with %v, want the fence's error", tc.method, err)
		}
		if begun != ended {
			t.Errorf("%s: %d writes begun, %d ended", tc.method, begun, ended)
		}
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFenceAbandonsAWriteAtItsDeadline: a write leaves with the fence's deadline on its
// context, so that it is never answered after another replica may write; its body stays
// readable until it is closed; reads and writes without a deadline are sent as they are.
func TestFenceAbandonsAWriteAtItsDeadline(t *testing.T) {
	t.Parallel()
	deadline := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		method   string
		deadline time.Time
		want     bool
	}{
		{method: http.MethodPut, deadline: deadline, want: true},
		{method: http.MethodPut, want: false},
		{method: http.MethodGet, deadline: deadline, want: false},
	} {
		var got time.Time
		var hasDeadline bool
		f := &fence{
			next: roundTripperFunc(func(req *http.Request) (*http.Response, error) {
				got, hasDeadline = req.Context().Deadline()
				return httptest.NewRecorder().Result(), nil
			}),
			begin:    func() (func(), error) { return func() {}, nil },
			deadline: func() time.Time { return tc.deadline },
		}
		resp, err := f.RoundTrip(httptest.NewRequest(tc.method, "https://member/api/v1/namespaces/default/configmaps/app", nil))
		if err != nil {
			t.Fatalf("%s: %v", tc.method, err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Errorf("%s: reading the body: %v", tc.method, err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Errorf("%s: closing the body: %v", tc.method, err)
		}
		if hasDeadline != tc.want || (tc.want && !got.Equal(tc.deadline)) {
			t.Errorf("%s with deadline %v: sent with deadline %v (%v), want %v", tc.method, tc.deadline, got, hasDeadline, tc.want)
		}
	}
}
