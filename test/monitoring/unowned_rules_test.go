package monitoring

import (
	"testing"
)

// TestMembersUnownedRule tests ConfigBundleMembersUnowned as `promtool test rules` would, over a
// history of configbundle_fleet_members_unowned from two replicas: the one that writes the Fleet
// exports the count, the other 0. It fires once members have been unowned for its 2 minutes, and
// only then, however the writer changes meanwhile; never for a hand-over shorter than that; and
// it resolves once every member is managed again.
func TestMembersUnownedRule(t *testing.T) {
	const minutes = 30
	series := func(instance string, value func(int) float64) seriesHistory {
		return seriesHistory{
			labels: map[string]string{"__name__": "configbundle_fleet_members_unowned", "job": hubJob, "instance": instance},
			value:  value,
		}
	}
	for _, tc := range []struct {
		name    string
		history []seriesHistory
		firing  []int // the minutes it fires at
	}{{
		name: "members left unowned from minute 5 to 15, the writer moving at minute 10",
		history: []seriesHistory{
			series("10.0.0.1:8443", func(m int) float64 { return when(m >= 5 && m < 10, 3) }),
			series("10.0.0.2:8443", func(m int) float64 { return when(m >= 10 && m < 15, 3) }),
		},
		firing: minutesFrom(7, 15),
	}, {
		name: "a hand-over of a minute, every minute in ten, and a healthy fleet",
		history: []seriesHistory{
			series("10.0.0.1:8443", func(m int) float64 { return when(m%10 == 3, 2) }),
			series("10.0.0.2:8443", func(int) float64 { return 0 }),
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			firingAt := evalAlert(t, "ConfigBundleMembersUnowned", minutes, tc.history)
			for m := 0; m <= minutes; m++ {
				want := 0
				for _, f := range tc.firing {
					if f == m {
						want = 1
					}
				}
				if got := len(firingAt[m]); got != want {
					t.Errorf("minute %d: %d alerts firing (%v), want %d", m, got, firingAt[m], want)
				}
			}
		})
	}
}

// minutesFrom returns the minutes from first to before end.
func minutesFrom(first, end int) []int {
	var out []int
	for m := first; m < end; m++ {
		out = append(out, m)
	}
	return out
}
