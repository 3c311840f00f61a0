package config

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"testing"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// memberCRDFile is the ConfigBundle CRD the hub embeds and applies to the members (MemberCRDs).
const memberCRDFile = "crd/bases/configbundle.dev_configbundles.yaml"

// memberCRDHashes holds, by revision (hubv1alpha1.MemberCRDRevision), the sha256 of the
// embedded ConfigBundle CRD at that revision. A new revision adds a line; none is ever changed.
var memberCRDHashes = map[int]string{
	1: "b0033cf99be9cdaffdbf9d51b11262b722fea50acfdc90fec743257614f55f86",
	2: "75eedcfb24ef0e4f2e2c5d0a120eadbb7591a6e68b116f1935af5ce53981ed34",
	3: "38358647d98110edd14bbf8840f284e60e3f8d7da0d002c41cf522f1f7acb9b5",
}

// TestMemberCRDRevision: the embedded ConfigBundle CRD is the one of its revision,
// hubv1alpha1.MemberCRDRevision. A change of the CRD without a bump of the revision would let an
// older hub replace the changed CRD, or a newer hub take it for its own and never upgrade it.
func TestMemberCRDRevision(t *testing.T) {
	raw, err := fs.ReadFile(files, memberCRDFile)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	got := hex.EncodeToString(sum[:])
	want, ok := memberCRDHashes[hubv1alpha1.MemberCRDRevision]
	switch {
	case !ok:
		t.Errorf("hubv1alpha1.MemberCRDRevision is %d, which memberCRDHashes does not list: add %d: %q to it (the sha256 of config/%s)",
			hubv1alpha1.MemberCRDRevision, hubv1alpha1.MemberCRDRevision, got, memberCRDFile)
	case got != want:
		t.Errorf("the embedded ConfigBundle CRD (config/%s) changed: its sha256 is %s, not %s of revision %d. "+
			"Bump MemberCRDRevision (api/hub/v1alpha1) to %d and update the hash: add %d: %q to memberCRDHashes",
			memberCRDFile, got, want, hubv1alpha1.MemberCRDRevision, hubv1alpha1.MemberCRDRevision+1, hubv1alpha1.MemberCRDRevision+1, got)
	}
	for rev, hash := range memberCRDHashes {
		if rev > hubv1alpha1.MemberCRDRevision {
			t.Errorf("memberCRDHashes lists revision %d, above hubv1alpha1.MemberCRDRevision %d", rev, hubv1alpha1.MemberCRDRevision)
		}
		if rev != hubv1alpha1.MemberCRDRevision && hash == got {
			t.Errorf("the embedded ConfigBundle CRD is the one of revision %d, not of %d: a revision names one CRD", rev, hubv1alpha1.MemberCRDRevision)
		}
	}
}
