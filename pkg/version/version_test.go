package version

import (
	"maps"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestGet(t *testing.T) {
	info := Get()
	if info.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", info.GoVersion, runtime.Version())
	}
	if info.Version == "" || info.GitCommit == "" {
		t.Errorf("Version %q and GitCommit %q must default to something", info.Version, info.GitCommit)
	}

	// The linker's values win.
	defer func(v, c string) { Version, GitCommit = v, c }(Version, GitCommit)
	Version, GitCommit = "v1.2.3", "abc123"
	if got := Get(); got.Version != "v1.2.3" || got.GitCommit != "abc123" {
		t.Errorf("Get() = %+v, want the values set with -ldflags -X", got)
	}
	if s := Get().String(); !strings.Contains(s, "v1.2.3") || !strings.Contains(s, "abc123") || !strings.Contains(s, runtime.Version()) {
		t.Errorf("String() = %q", s)
	}
}

func TestRevision(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, ""},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "deadbeef"}, {Key: "vcs.modified", Value: "false"}}, "deadbeef"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "deadbeef"}}, "deadbeef-dirty"},
	} {
		if got := revision(tc.settings); got != tc.want {
			t.Errorf("revision(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
}

func TestUserAgent(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = "v0.3.0"
	for _, tc := range []struct {
		replicaID, want string
	}{
		{"hub-7d9f-abc", "configbundle-hub/v0.3.0 (hub-7d9f-abc)"},
		{"configbundle-hub-7d9f8-x2x4z", "configbundle-hub/v0.3.0 (configbundle-hub-7d9f8-x2x4z)"},
		{"", "configbundle-hub/v0.3.0"},
	} {
		if got := UserAgent(tc.replicaID); got != tc.want {
			t.Errorf("UserAgent(%q) = %q, want %q", tc.replicaID, got, tc.want)
		}
	}
	// Without a version set with the linker: the one Get finds, never empty.
	Version = ""
	if got, want := UserAgent("r-1"), "configbundle-hub/"+Get().Version+" (r-1)"; got != want || Get().Version == "" {
		t.Errorf("UserAgent(%q) = %q, want %q", "r-1", got, want)
	}
}

func TestBuildInfoCollector(t *testing.T) {
	defer func(v, c string) { Version, GitCommit = v, c }(Version, GitCommit)
	Version, GitCommit = "v1.2.3", "abc123"
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewBuildInfoCollector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != BuildInfoMetric || len(families[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want one %s", families, BuildInfoMetric)
	}
	m := families[0].GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"version": "v1.2.3", "gitCommit": "abc123", "goVersion": runtime.Version()}
	if !maps.Equal(labels, want) || m.GetGauge().GetValue() != 1 {
		t.Errorf("%s%v = %v, want %v = 1", BuildInfoMetric, labels, m.GetGauge().GetValue(), want)
	}
}
