package statusbudget

import (
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	t.Parallel()
	b := Budget[string]{Interval: time.Hour}
	if wait := b.Take("a", false); wait != 0 {
		t.Errorf("first write of a waits %v, want 0", wait)
	}
	if wait := b.Take("a", false); wait <= 0 || wait > time.Hour {
		t.Errorf("second write of a waits %v, want up to an hour", wait)
	}
	if wait := b.Take("b", false); wait != 0 {
		t.Errorf("keys are independent: b waits %v", wait)
	}
	if wait := b.Take("a", true); wait != 0 {
		t.Errorf("a transition waits %v, want 0", wait)
	}
	b.Forget("a")
	if wait := b.Take("a", false); wait != 0 {
		t.Errorf("a forgotten key waits %v, want 0", wait)
	}
}

// TestRateLimiterCapsTheBackOff: a status write that failed again and again (the hub cluster
// refused connections for a minute) is retried within MaxRetryDelay, while the first retries
// stay fast.
func TestRateLimiterCapsTheBackOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failures int
		atMost   time.Duration
	}{
		{failures: 1, atMost: 5 * time.Millisecond},
		{failures: 5, atMost: 80 * time.Millisecond},
		{failures: 20, atMost: MaxRetryDelay},
		{failures: 60, atMost: MaxRetryDelay},
	} {
		rl := RateLimiter[string]()
		var last time.Duration
		for range tc.failures {
			last = rl.When("item")
		}
		if last > tc.atMost {
			t.Errorf("after %d failures: retried in %v, want at most %v", tc.failures, last, tc.atMost)
		}
	}
}
