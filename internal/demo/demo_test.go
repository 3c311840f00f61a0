package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"configbundle.dev/hub/internal/demo"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/hubprocess"
)

// demoTimeout bounds the whole tour on a loaded two-core machine.
const demoTimeout = 8 * time.Minute

// TestDemo takes the same tour as `make demo`, with its three members (placement needs a member
// left unselected), so that the demo cannot rot.
func TestDemo(t *testing.T) {
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	bin, err := hubprocess.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	var out bytes.Buffer
	if err := demo.Run(ctx, demo.Options{Out: &out, HubBinary: bin}); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	// Compared with the runs of spaces of the tables collapsed.
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"==> Starting a local fleet: a hub and 3 members",
		"Registered member member-1: Secret configbundle-system/member-1 on the hub",
		"all 3 members Ready",
		"healed in ",
		"member-2 (SIGSTOP on its kube-apiserver)",
		"reported Unreachable after",
		"member-2 False Unreachable",
		"meanwhile member-1 still heals",
		"member-2 Ready again",
		// Placement: on two of three members by label, moved by a label change, restored.
		"$ kubectl label memberclusters member-1 member-2 env=prod",
		"ConfigMap web in member-1 after",
		"NAME SELECTED READY FAILED REASON AGE web 2 2 0 AllReady",
		"member-1 prod placed, Synced \"placed by the hub in every env=prod member\" member-2 prod placed, Synced \"placed by the hub in every env=prod member\" member-3 <none> <none> <none>",
		"member-2: placed bundle deleted by the hub after",
		"member-1 prod placed, Synced \"placed by the hub in every env=prod member\" member-2 staging <none> <none> member-3 prod placed, Synced \"placed by the hub in every env=prod member\"",
		"restored by the hub after",
		"NAME SELECTED READY HEALS web 2 2 1",
		"Normal PlacedBundleHealed fleetbundle/web Member member-1: restored the placed ConfigBundle default/web (deleted)",
		"$ kubectl get fleet",
		// 3 members × 3 samples, and the FleetBundle's 2; the 2 ConfigMap heals of member-1.
		"default True AllReady 3 3 11 11 0 2",
		"==> Cleaning up",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}
