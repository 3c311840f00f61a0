// Package version says which build of ConfigBundle Hub is running: its version, the git commit
// it was built from and the Go version that built it. `hub version` prints it and the hub
// exports it as the configbundle_build_info metric. Release builds set Version and GitCommit
// with the linker:
//
//	go build -ldflags "-X configbundle.dev/hub/pkg/version.Version=v0.2.0 -X configbundle.dev/hub/pkg/version.GitCommit=$(git rev-parse HEAD)" ./hub
//
// Left empty, they default to what the Go toolchain recorded in the binary
// (runtime/debug.ReadBuildInfo): the module version ("devel" for a build from a checkout) and
// the VCS revision, with "-dirty" when the work tree had uncommitted changes.
package version

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Set with -ldflags -X; see the package documentation.
var (
	// Version is the release version, such as v0.2.0.
	Version string
	// GitCommit is the git commit the binary was built from.
	GitCommit string
)

// Unknown is what Info says of a fact the binary does not know.
const Unknown = "unknown"

// Info describes the running binary.
type Info struct {
	// Version is Version, else the main module's version, else "devel".
	Version string
	// GitCommit is GitCommit, else the VCS revision Go recorded, else Unknown.
	GitCommit string
	// GoVersion is the Go version that built the binary, such as go1.26.3.
	GoVersion string
}

// Get returns the running binary's Info.
func Get() Info {
	info := Info{Version: Version, GitCommit: GitCommit, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = cmp.Or(info.Version, v)
		}
		info.GitCommit = cmp.Or(info.GitCommit, revision(bi.Settings))
	}
	info.Version = cmp.Or(info.Version, "devel")
	info.GitCommit = cmp.Or(info.GitCommit, Unknown)
	return info
}

// revision is the VCS revision among the build settings, "-dirty" appended if the work tree
// had changes, or "" if none was recorded.
func revision(settings []debug.BuildSetting) string {
	var rev, modified string
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" && modified == "true" {
		rev += "-dirty"
	}
	return rev
}

// String renders i as `hub version` prints it: one "key: value" line per fact.
func (i Info) String() string {
	return fmt.Sprintf("Version:   %s\nGitCommit: %s\nGoVersion: %s\n", i.Version, i.GitCommit, i.GoVersion)
}

// UserAgent is the user agent of every client the hub replica replicaID builds, of the hub
// cluster and of the members: "configbundle-hub/<version> (<replica-id>)", such as
// "configbundle-hub/v0.3.0 (hub-7d9f-abc)", with Get()'s version, so that an API server's audit
// log says which build and which replica sent each request. Without a replica id it is
// "configbundle-hub/<version>".
func UserAgent(replicaID string) string {
	ua := hubv1alpha1.UserAgentPrefix + Get().Version
	if replicaID == "" {
		return ua
	}
	return ua + " (" + replicaID + ")"
}

// BuildInfoMetric is the name of the gauge NewBuildInfoCollector returns.
const BuildInfoMetric = "configbundle_build_info"

// NewBuildInfoCollector returns the gauge configbundle_build_info, always 1, labelled with
// Get()'s version, goVersion and gitCommit: the usual way to tell which build is running
// (join it on instance in a query). The hub registers it with controller-runtime's registry.
func NewBuildInfoCollector() prometheus.Collector {
	info := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: BuildInfoMetric,
		Help: "A metric with a constant '1' value labelled by the version, Go version and git commit the hub was built from.",
		ConstLabels: prometheus.Labels{
			"version":   info.Version,
			"goVersion": info.GoVersion,
			"gitCommit": info.GitCommit,
		},
	})
	g.Set(1)
	return g
}
