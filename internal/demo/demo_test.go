package demo_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"configbundle.dev/hub/internal/demo"
	"configbundle.dev/hub/internal/testing/hubprocess"
)

// demoTimeout bounds the whole tour on a loaded two-core machine.
const demoTimeout = 8 * time.Minute

// TestDemo takes the same tour as `make demo`, with two members, so that the demo cannot rot.
func TestDemo(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds the control-plane binaries")
	}
	bin, err := hubprocess.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	var out bytes.Buffer
	if err := demo.Run(ctx, demo.Options{Out: &out, HubBinary: bin, Members: 2}); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{
		"==> Starting a local fleet: a hub and 2 members",
		"Registered member member-1: Secret configbundle-system/member-1 on the hub",
		"all 2 members Ready",
		"healed in ",
		"member-2 (SIGSTOP on its kube-apiserver)",
		"reported Unreachable after",
		"member-2   False   Unreachable",
		"meanwhile member-1 still heals",
		"member-2 Ready again",
		"$ kubectl get fleet",
		"default   True    AllReady   2          2                6         6",
		"==> Cleaning up",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}
