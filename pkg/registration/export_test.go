package registration

import "time"

// Hooks for the external tests of this package.
var (
	BuildKubeconfig = buildKubeconfig
	Verify          = verify
	ReleaseTimeout  = &releaseTimeout
	UntilRenewal    = untilRenewal
)

// SetClock makes r read the time from now.
func SetClock(r *Renewer, now func() time.Time) { r.now = now }
