package registration

// Hooks for the external tests of this package.
var (
	BuildKubeconfig = buildKubeconfig
	Verify          = verify
	ReleaseTimeout  = &releaseTimeout
)
