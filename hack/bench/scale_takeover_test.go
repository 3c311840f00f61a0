package main

import (
	"testing"
	"time"
)

// TestFlagDuration checks that the takeover's bound reads the replicas' flags as the hub does:
// the last one wins, with = or the value next, one dash or two.
func TestFlagDuration(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, time.Minute},
		{[]string{"--zap-time-encoding=rfc3339nano", "--sharded"}, time.Minute},
		{[]string{"--lease-duration=6s"}, 6 * time.Second},
		{[]string{"-lease-duration=6s", "--lease-duration", "9s"}, 9 * time.Second},
		{[]string{"--lease-duration-other=6s", "lease-duration=7s"}, time.Minute},
	} {
		if got := flagDuration(tc.args, "lease-duration", time.Minute); got != tc.want {
			t.Errorf("flagDuration(%q) = %s, want %s", tc.args, got, tc.want)
		}
	}
}
