package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// quotedVersion finds a version of the hub quoted as an image tag or a chart version: after
// configbundle/hub: or configbundle-hub:, image.tag=, newTag:, appVersion: or --version.
var quotedVersion = regexp.MustCompile(`(?:configbundle[-/]hub:|image\.tag=|newTag:\s*|appVersion:\s*|--version[ =])v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\b`)

// releasedVersion is a release's heading in CHANGELOG.md: ## [v0.9.0].
var releasedVersion = regexp.MustCompile(`(?m)^## \[v(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\]`)

// quotedVersions returns the hub versions text quotes, without their v.
func quotedVersions(text string) []string {
	var out []string
	for _, m := range quotedVersion.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestQuotedVersions(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"make docker-build IMG=registry.example.com/configbundle-hub:v0.1.0", []string{"0.1.0"}},
		{"image: ghcr.io/configbundle/hub:v1.2.3-rc.1", []string{"1.2.3-rc.1"}},
		{"--set image.repository=r,image.tag=v0.4.0", []string{"0.4.0"}},
		{"  newTag: v0.5.0", []string{"0.5.0"}},
		{"helm install x oci://r/configbundle-hub --version 0.9.0", []string{"0.9.0"}},
		{"appVersion: v0.9.0", []string{"0.9.0"}},
		{"ghcr.io/configbundle/hub:dev, image.tag=$TAG, newTag: $TAG", nil},
		{"helm v3.22.0, etcd v3.6.8, Kubernetes v1.36.3", nil},
	} {
		if got := quotedVersions(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("quotedVersions(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestDocsQuoteOnlyReleasedVersions: every image tag or chart version of the hub that the README
// and docs quote is a release of CHANGELOG.md, so that a reader never pulls one that does not
// exist.
func TestDocsQuoteOnlyReleasedVersions(t *testing.T) {
	root := filepath.Join("..", "..")
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	released := map[string]bool{}
	for _, m := range releasedVersion.FindAllStringSubmatch(string(changelog), -1) {
		released[m[1]] = true
	}
	pages := []string{filepath.Join(root, "README.md")}
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range quotedVersions(string(text)) {
			if !released[v] {
				t.Errorf("%s quotes the version %s of the hub, which CHANGELOG.md has no release of (## [v%s])", page, v, v)
			}
		}
	}
}
