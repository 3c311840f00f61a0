package monitoring

import (
	"testing"
)

// credentialSeries is one gauge of a member's credential, in seconds since the epoch of
// evalAlert's history (minute m is 60*m).
func credentialSeries(name string, value func(minute int) float64) seriesHistory {
	return seriesHistory{
		labels: map[string]string{"__name__": name, "job": hubJob, "instance": "10.0.0.1:8443", "cluster": "m1"},
		value:  value,
	}
}

// TestCredentialsRenewalRules tests ConfigBundleMemberCredentialsRenewalFailing and
// ConfigBundleMemberCredentialsExpiring as `promtool test rules` would, over the history of a
// token of 100 minutes issued at minute 0 that the hub renews at minute 80. Renewed in time,
// neither fires; a renewal that keeps failing fires the first once minute 90 has passed, before the token
// expires at minute 100, and the second (warning: under 7 days) once it has failed for its 10
// minutes. A credential the hub does not renew fires the second alone.
func TestCredentialsRenewalRules(t *testing.T) {
	const minutes = 99
	expiry := func(renewed bool) func(int) float64 {
		return func(m int) float64 { return when(renewed && m >= 80, 200*60) + when(!renewed || m < 80, 100*60) }
	}
	renewal := func(renewed bool) func(int) float64 {
		return func(m int) float64 { return when(renewed && m >= 80, 180*60) + when(!renewed || m < 80, 80*60) }
	}
	failing := func(renewed bool) func(int) float64 {
		return func(m int) float64 { return when(!renewed && m >= 80, 1) }
	}
	history := func(renewed bool) []seriesHistory {
		return []seriesHistory{
			credentialSeries("configbundle_member_credentials_expiry_timestamp_seconds", expiry(renewed)),
			credentialSeries("configbundle_member_credentials_renewal_timestamp_seconds", renewal(renewed)),
			credentialSeries("configbundle_member_credentials_renewal_failing", failing(renewed)),
		}
	}
	notRenewed := []seriesHistory{credentialSeries("configbundle_member_credentials_expiry_timestamp_seconds", expiry(false))}
	for _, tc := range []struct {
		name, alert string
		history     []seriesHistory
		firing      []int
	}{
		{"renewed in time", "ConfigBundleMemberCredentialsRenewalFailing", history(true), nil},
		{"renewed in time", "ConfigBundleMemberCredentialsExpiring", history(true), nil},
		{"renewal failing", "ConfigBundleMemberCredentialsRenewalFailing", history(false), minutesFrom(91, minutes+1)},
		{"renewal failing", "ConfigBundleMemberCredentialsExpiring", history(false), minutesFrom(90, minutes+1)},
		{"not renewed by the hub", "ConfigBundleMemberCredentialsRenewalFailing", notRenewed, nil},
		{"not renewed by the hub", "ConfigBundleMemberCredentialsExpiring", notRenewed, minutesFrom(10, minutes+1)},
	} {
		t.Run(tc.name+"/"+tc.alert, func(t *testing.T) {
			firingAt := evalAlert(t, tc.alert, minutes, tc.history)
			for m := 0; m <= minutes; m++ {
				want := 0
				for _, f := range tc.firing {
					if f == m {
						want = 1
					}
				}
				// ConfigBundleMemberCredentialsExpiring has a warning and a critical rule of the
				// same name: evalAlert evaluates the last one read (critical, under a day).
				if got := min(len(firingAt[m]), 1); got != want {
					t.Errorf("minute %d: %d alerts firing (%v), want %d", m, len(firingAt[m]), firingAt[m], want)
				}
			}
		})
	}
}
