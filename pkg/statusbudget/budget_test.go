package statusbudget

import (
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
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
