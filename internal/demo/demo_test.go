package demo_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/demo"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/hubprocess"
	"configbundle.dev/hub/pkg/hubmanager"
)

// demoTimeout bounds the whole tour on a loaded two-core machine.
const demoTimeout = 8 * time.Minute

// TestDemo takes the same tour as `make demo DEMO_ARGS=--keep`, with its three members
// (placement needs a member left unselected), and tries what it prints for the kept fleet, so
// that the demo cannot rot.
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
	// As `make demo DEMO_ARGS=--keep`: the fleet keeps running once the tour is over, and the
	// commands it prints are tried on it before it is stopped.
	out, finished := &syncBuffer{}, make(chan struct{})
	var runErr error
	go func() {
		defer close(finished)
		runErr = demo.Run(ctx, demo.Options{Out: out, HubBinary: bin, Keep: true})
	}()
	defer func() { cancel(); <-finished }() // the demo stops its fleet whatever the test's outcome
	select {
	case <-finished:
		t.Fatalf("demo failed: %v\n%s", runErr, out.String())
	case <-out.seen("    hub log: "):
	}
	checkKeptFleet(t, out.String())
	cancel()
	<-finished
	if runErr != nil {
		t.Fatalf("demo failed: %v\n%s", runErr, out.String())
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
		// The ClusterSet global bound into default, which the FleetBundles below need.
		"$ kubectl apply -f config/samples/clusterset_global.yaml",
		"clustersetbinding.hub.configbundle.dev/global created",
		"NAME CLUSTERS INUSE AGE global 3 <none>",
		"NAME CLUSTERSET CLUSTERS INUSE READY REASON AGE global global 3 <none> True Bound",
		// Placement: on two of three members by label, moved by a label change, restored.
		"$ kubectl label memberclusters member-1 member-2 env=prod",
		"ConfigMap web in member-1 after",
		"NAME SELECTED UPDATED READY FAILED REVISION STAGE REASON AGE web 2 2 2 0 1 <none> AllReady",
		"member-1 prod placed, Synced \"placed by the hub in every env=prod member\" member-2 prod placed, Synced \"placed by the hub in every env=prod member\" member-3 <none> <none> <none>",
		"member-2: placed bundle deleted by the hub after",
		"member-1 prod placed, Synced \"placed by the hub in every env=prod member\" member-2 staging <none> <none> member-3 prod placed, Synced \"placed by the hub in every env=prod member\"",
		"restored by the hub after",
		"NAME SELECTED READY HEALS web 2 2 1",
		"Normal PlacedBundleHealed fleetbundle/web Member member-1: restored the placed ConfigBundle default/web (deleted)",
		// The staged rollout: canary first; a value the canary refuses halts it, the rest keep
		// the old one; the fix rolls out.
		"$ kubectl label memberclusters member-1 ring=canary",
		"revision 1's ConfigMap in member-1 (canary) after",
		"member-1 canary 2 placed, Synced \"checkout=v2 debug=false\" member-2 rest 1 placed, Synced \"checkout=v1 debug=false\" member-3 rest 1 placed, Synced \"checkout=v1 debug=false\"",
		"the canary's bundle failed after",
		"no other member got revision 3",
		"flags 3 1 2 1 3 canary RolloutHalted",
		"member-1 canary 3 placed, UpdateFailed \"checkout=v2 debug=false\" member-2 rest 2 placed, Synced \"checkout=v2 debug=false\" member-3 rest 2 placed, Synced \"checkout=v2 debug=false\"",
		"Progressing False RolloutHalted",
		"Stalled True RolloutHalted",
		"revision 4's ConfigMap in member-1 (canary) after",
		"flags 3 3 3 0 4 rest AllReady",
		"Warning RolloutHalted fleetbundle/flags",
		"Normal RolloutComplete fleetbundle/flags",
		// Per-member values: one templated FleetBundle, each member its own message, the dev
		// member LOG_LEVEL=debug; a relabel re-renders one member, no heal; a missing label is
		// RenderFailed for that member alone, which keeps what it holds, until the label is back.
		"$ kubectl label memberclusters member-2 region=us env=dev --overwrite",
		"its own message in the ConfigMap of member-1 after",
		"MEMBER REGION ENV DATA.MESSAGE DATA.LOG_LEVEL member-1 eu prod \"endpoint=https://api.eu.example.com cluster=member-1\" info member-2 us dev \"endpoint=https://api.us.example.com cluster=member-2\" debug member-3 ap prod \"endpoint=https://api.ap.example.com cluster=member-3\" info",
		"ConfigMap api changed in member-3 (resourceVersion",
		"a re-render is not a heal, nor a new revision 0 1 $",
		"member-3 sa prod \"endpoint=https://api.sa.example.com cluster=member-3\" info",
		"api 3 2 2 1 1 <none> ClustersFailed",
		"CLUSTER REASON MESSAGE member-1 RenderFailed revision 1 does not render for member member-1: template: spec.template.spec.message:",
		"map has no entry for key \"region\"",
		"member-1 keeps what it held",
		"member-1 <none> prod \"endpoint=https://api.eu.example.com cluster=member-1\" info",
		"api 3 3 3 0 1 <none> AllReady",
		"$ hub render api -n default --cluster member-2",
		// A guarded ConfigMap: its member refuses a hand edit while the hub is stopped.
		"==> Guard: ConfigBundle guarded in member-1 with spec.driftPolicy: Guard",
		"$ kubectl --context member-1 edit configmap guarded # the hub is stopped",
		"ConfigMap default/guarded is guarded by ConfigBundle guarded (driftPolicy Guard): change the ConfigBundle guarded instead",
		"==> Starting the hub process again",
		"$ kubectl get fleet",
		// 3 members × 4 samples, web's 2, flags' 3 and api's 3; the 2 ConfigMap heals of member-1.
		"default True AllReady 3 3 20 20 0 2",
		"==> Cleaning up",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}

// TestRolloutSample checks that config/samples/fleetbundle_rollout.yaml is the FleetBundle the
// demo applies (but for the canary's soakTime, 3 s in the demo).
func TestRolloutSample(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "fleetbundle_rollout.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(yaml.UnmarshalStrict(raw, got)).To(Succeed())
	g.Expect(got).To(Equal(demo.RolloutFleetBundle()))
}

// TestTemplatedSample checks that config/samples/fleetbundle_templated.yaml is the FleetBundle
// the demo applies.
func TestTemplatedSample(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "fleetbundle_templated.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	got := &hubv1alpha1.FleetBundle{}
	g.Expect(yaml.UnmarshalStrict(raw, got)).To(Succeed())
	g.Expect(got).To(Equal(demo.TemplatedFleetBundle()))
}

// checkKeptFleet tries what the demo prints for the kept fleet: its KUBECONFIG has a working
// context for the hub and for every member, each reaching its own cluster (a member's is the
// cluster its MemberCluster's clusterID names), the register command printed works with it
// as written, and the hub's metrics are at the address printed.
func checkKeptFleet(t *testing.T, out string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	export := regexp.MustCompile(`(?m)^\s*export KUBECONFIG=(\S+)$`).FindStringSubmatch(out)
	g.Expect(export).NotTo(BeNil(), "the demo prints one export KUBECONFIG=...")
	kubeconfig := export[1]
	raw, err := (&clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}).Load()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw.CurrentContext).To(Equal("hub"))
	g.Expect(slices.Sorted(maps.Keys(raw.Contexts))).To(Equal([]string{"hub", "member-1", "member-2", "member-3"}))

	scheme, err := hubmanager.Scheme()
	g.Expect(err).NotTo(HaveOccurred())
	uids := map[string]string{} // context: the uid of its cluster's kube-system
	var mcs hubv1alpha1.MemberClusterList
	for name := range raw.Contexts {
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		g.Expect(err).NotTo(HaveOccurred())
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		g.Expect(err).NotTo(HaveOccurred())
		ns := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns)).To(Succeed(), "context %s", name)
		uids[name] = string(ns.UID)
		if name == "hub" {
			g.Expect(c.List(ctx, &mcs)).To(Succeed(), "the hub context reaches the hub cluster")
		}
	}
	g.Expect(mcs.Items).To(HaveLen(3))
	for _, mc := range mcs.Items {
		g.Expect(uids[mc.Name]).To(Equal(mc.Status.ClusterID), "context %s reaches member %s", mc.Name, mc.Name)
	}
	g.Expect(uids).To(HaveLen(4))
	g.Expect(slices.Compact(slices.Sorted(maps.Values(uids)))).To(HaveLen(4), "four contexts, four clusters")

	register := regexp.MustCompile(`(?m)^\s*(\S+ register member-1 [^#]*?)\s*#`).FindStringSubmatch(out)
	g.Expect(register).NotTo(BeNil(), "the demo prints a register command")
	args := strings.Fields(register[1])
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	regOut, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "%s:\n%s", register[1], regOut)

	metrics := regexp.MustCompile(`curl -s http://(\S+)/metrics`).FindStringSubmatch(out)
	g.Expect(metrics).NotTo(BeNil(), "the demo prints the hub's metrics address")
	scrape, err := fleet.Scrape(metrics[1])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(scrape).To(ContainSubstring(`configbundle_member_bundles{cluster="member-1"}`))
}

// syncBuffer is the demo's output, written by the demo and read by the test at once.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	waiters map[string]chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	s.notify()
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// seen is closed once the output contains text.
func (s *syncBuffer) seen(text string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if s.waiters == nil {
		s.waiters = map[string]chan struct{}{}
	}
	s.waiters[text] = ch
	s.notify()
	return ch
}

// notify closes the channels of the texts the output contains; s.mu is held.
func (s *syncBuffer) notify() {
	for text, ch := range s.waiters {
		if strings.Contains(s.b.String(), text) {
			close(ch)
			delete(s.waiters, text)
		}
	}
}
