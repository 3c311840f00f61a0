package controlplane

import (
	"context"
	"testing"
	"time"
)

// MustStart starts one control plane named name for a test, within timeout, failing the test on
// error; it is stopped when the test ends.
func MustStart(t testing.TB, name string, timeout time.Duration) *ControlPlane {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cps, err := Start(ctx, Named(Options{StartTimeout: timeout}, name)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := StopAll(cps); err != nil {
			t.Error(err)
		}
	})
	return cps[0]
}
