package spokeprovider_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	hubconfig "configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/netproxy"
	"configbundle.dev/hub/internal/testing/suite"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Timeouts of the suite, generous for a loaded two-core machine running with -race.
const (
	startTimeout = 3 * time.Minute  // the three control planes
	stopTimeout  = 30 * time.Second // a provider's manager, after its context ends
	joinTimeout  = 15 * time.Second // a member joins, or a kubeconfig fails
	interval     = 20 * time.Millisecond
	// quietPeriod is how long nothing may change for a Consistently; longer than the first
	// retry delay of the provider (2 seconds), so that a retry would be seen.
	quietPeriod = 2500 * time.Millisecond
)

// Provider options of the suite: a member is Unreachable after two probes, about two seconds
// after its API server stops answering.
const (
	probeInterval    = 300 * time.Millisecond
	probeTimeout     = time.Second
	failureThreshold = 2
	connectTimeout   = 10 * time.Second
	retryMaxDelay    = 3 * time.Second
)

// The suite runs one hub and two members, each a real control plane, started once. Both
// members serve the ConfigBundle CRD. The hub serves no ValidatingAdmissionPolicy, as a
// Kubernetes before 1.30: joined as a member, it is one the hub cannot guard. Every test runs a provider (and its manager) of its own
// on a hub namespace of its own.
var (
	hub, memberA, memberB *controlplane.ControlPlane
	hubClient             client.Client
	memberClients         = map[*controlplane.ControlPlane]client.Client{}
	memberCRDs            []*apiextensionsv1.CustomResourceDefinition
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	var err error
	if memberCRDs, err = hubconfig.MemberCRDs(); err != nil {
		fmt.Fprintln(os.Stderr, "loading the member CRDs:", err)
		return 1
	}
	return suite.Run(m, suite.Options{
		StartTimeout: startTimeout,
		Planes: []controlplane.Plane{
			{Name: "hub", Options: controlplane.Options{WithoutAdmissionPolicies: true}},
			{Name: "member-a", Options: controlplane.Options{CRDs: memberCRDs}},
			// member-b's audit log says which writes reached it (its CRD's, by the hub).
			{Name: "member-b", Options: controlplane.Options{CRDs: memberCRDs, AuditWrites: true}},
		},
		Setup: func(_, _ context.Context, cps []*controlplane.ControlPlane) error {
			hub, memberA, memberB = cps[0], cps[1], cps[2]
			for _, cp := range cps {
				c, err := client.New(cp.Config, client.Options{})
				if err != nil {
					return fmt.Errorf("creating client: %w", err)
				}
				memberClients[cp] = c
			}
			hubClient = memberClients[hub]
			delete(memberClients, hub)
			return nil
		},
	})
}

// testOptions are the provider options of the suite; CRDs are left out where irrelevant.
func testOptions() spokeprovider.Options {
	return spokeprovider.Options{
		ProbeInterval:    probeInterval,
		ProbeTimeout:     probeTimeout,
		FailureThreshold: failureThreshold,
		ConnectTimeout:   connectTimeout,
		RetryMaxDelay:    retryMaxDelay,
	}
}

// fixture is one provider under test, run by a manager of its own on the hub, watching a hub
// namespace of its own. It records what the provider tells its callbacks and what it engages.
type fixture struct {
	t        *testing.T
	ns       string
	provider *spokeprovider.Provider
	engaged  *engagements
	history  *history
}

// startProvider starts a provider with opts (Namespace set to a new namespace) and stops it
// when the test ends.
func startProvider(t *testing.T, opts spokeprovider.Options) *fixture {
	t.Helper()
	return startProviderOn(t, opts, hub.Config)
}

// startProviderOn is startProvider with a manager that reaches the hub through hubConfig; setups
// add more to the manager (a reconciler of the members' bundles) after the provider.
func startProviderOn(t *testing.T, opts spokeprovider.Options, hubConfig *rest.Config, setups ...func(mcmanager.Manager, *spokeprovider.Provider) error) *fixture {
	t.Helper()
	opts.Namespace = newHubNamespace(t)
	provider := spokeprovider.New(opts)
	f := &fixture{t: t, ns: opts.Namespace, provider: provider, engaged: &engagements{}, history: &history{p: provider}}
	provider.OnChange(f.history.changed)
	provider.OnReady(f.history.ready)

	cacheOpts := cache.Options{}
	provider.SecretCacheOptions(&cacheOpts)
	mgr, err := mcmanager.New(hubConfig, provider, manager.Options{
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Every test sets up the provider's controller anew, under the same name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	if err := provider.SetupWithManager(mgr); err != nil {
		t.Fatalf("setting up the provider: %v", err)
	}
	for _, setup := range setups {
		if err := setup(mgr, provider); err != nil {
			t.Fatalf("setting up the manager: %v", err)
		}
	}
	if err := mgr.Add(f.engaged); err != nil {
		t.Fatalf("adding the engagement recorder: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager stopped: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Errorf("manager did not stop within %v", stopTimeout)
		}
	})
	return f
}

// newHubNamespace creates a namespace of its own for a test in the hub.
func newHubNamespace(t *testing.T) string {
	t.Helper()
	prefix := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix[:min(40, len(prefix))] + "-"}}
	if err := hubClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// memberSecret is a member's kubeconfig Secret, labelled.
func memberSecret(namespace, name string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{hubv1alpha1.DefaultSecretLabel: "true"}},
		Data: map[string][]byte{hubv1alpha1.DefaultSecretKey: kubeconfig},
	}
}

// createSecret registers a member by creating its labelled Secret in the provider's namespace.
func (f *fixture) createSecret(name string, kubeconfig []byte) {
	f.t.Helper()
	if err := hubClient.Create(context.Background(), memberSecret(f.ns, name, kubeconfig)); err != nil {
		f.t.Fatalf("creating Secret %s: %v", name, err)
	}
}

// updateSecret changes a member's Secret with mutate.
func (f *fixture) updateSecret(name string, mutate func(*corev1.Secret)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := &corev1.Secret{}
		if err := hubClient.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, s); err != nil {
			return err
		}
		mutate(s)
		return hubClient.Update(context.Background(), s)
	})
	if err != nil {
		f.t.Fatalf("updating Secret %s: %v", name, err)
	}
}

// setKubeconfig replaces the kubeconfig of a member's Secret.
func (f *fixture) setKubeconfig(name string, kubeconfig []byte) {
	f.t.Helper()
	f.updateSecret(name, func(s *corev1.Secret) { s.Data[hubv1alpha1.DefaultSecretKey] = kubeconfig })
}

// state polls what the provider knows of a member (the zero State if nothing).
func (f *fixture) state(name string) func() spokeprovider.State {
	return func() spokeprovider.State {
		s, _ := f.provider.State(name)
		return s
	}
}

// known polls whether the provider knows a member at all.
func (f *fixture) known(name string) func() bool {
	return func() bool {
		_, ok := f.provider.State(name)
		return ok
	}
}

// get polls the cluster the provider returns for a member.
func (f *fixture) get(name string) func() (cluster.Cluster, error) {
	return func() (cluster.Cluster, error) {
		return f.provider.Get(context.Background(), multicluster.ClusterName(name))
	}
}

// waitReady waits until a member is Ready and Connected and returns its cluster.
func (f *fixture) waitReady(g Gomega, name string) cluster.Cluster {
	f.t.Helper()
	g.Eventually(f.state(name)).WithTimeout(joinTimeout).WithPolling(interval).Should(beReady(hubv1alpha1.ConnectedReason))
	cl, err := f.get(name)()
	g.Expect(err).NotTo(HaveOccurred())
	return cl
}

// watchReadiness samples a member's State until stop is called, which returns every sample in
// which the member was unknown or not Ready: a Consistently that runs alongside other steps.
func (f *fixture) watchReadiness(name string) (stop func() []spokeprovider.State) {
	var (
		mu   sync.Mutex
		bad  []spokeprovider.State
		quit = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		ticker := time.NewTicker(interval / 4)
		defer ticker.Stop()
		for {
			if s, ok := f.provider.State(name); !ok || !s.Ready {
				mu.Lock()
				bad = append(bad, s)
				mu.Unlock()
			}
			select {
			case <-quit:
				return
			case <-ticker.C:
			}
		}
	}()
	return func() []spokeprovider.State {
		close(quit)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return bad
	}
}

// beReady matches a Ready State with reason.
func beReady(reason string) types.GomegaMatcher {
	return SatisfyAll(HaveField("Ready", BeTrue()), HaveField("Reason", Equal(reason)))
}

// beNotReady matches a State that is not Ready, with reason.
func beNotReady(reason string) types.GomegaMatcher {
	return SatisfyAll(HaveField("Ready", BeFalse()), HaveField("Reason", Equal(reason)))
}

// observation is what a callback of the provider was told, and the State at that moment.
type observation struct {
	At    time.Time
	State spokeprovider.State
	Known bool
}

// history records the provider's OnChange and OnReady callbacks, per member.
type history struct {
	p       *spokeprovider.Provider
	mu      sync.Mutex
	changes map[string][]observation
	readies map[string][]observation
}

func (h *history) changed(name string) { h.record(&h.changes, name) }
func (h *history) ready(name string)   { h.record(&h.readies, name) }

func (h *history) record(into *map[string][]observation, name string) {
	s, ok := h.p.State(name)
	o := observation{At: time.Now(), State: s, Known: ok}
	h.mu.Lock()
	defer h.mu.Unlock()
	if *into == nil {
		*into = map[string][]observation{}
	}
	(*into)[name] = append((*into)[name], o)
}

// changesOf returns the OnChange calls for a member so far.
func (h *history) changesOf(name string) []observation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]observation(nil), h.changes[name]...)
}

// readiesOf returns the OnReady calls for a member so far.
func (h *history) readiesOf(name string) []observation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]observation(nil), h.readies[name]...)
}

// engagement is one Engage call the manager passed on.
type engagement struct {
	Name    multicluster.ClusterName
	Cluster cluster.Cluster
	// PreviousLive says whether the member's previous engagement, if any, was still live when
	// this one began: make before break.
	PreviousLive bool
	ctx          context.Context
}

// Ended reports whether the engagement's context ended: the member was disengaged.
func (e engagement) Ended() bool { return e.ctx.Err() != nil }

// engagements is a multicluster-aware runnable that records every Engage, with its context,
// as any multicluster controller of the manager would see them.
type engagements struct {
	mu   sync.Mutex
	list []*engagement
}

var _ mcmanager.Runnable = &engagements{}

func (e *engagements) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (e *engagements) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	eng := &engagement{Name: name, Cluster: cl, ctx: ctx}
	for _, prev := range e.list {
		if prev.Name == name {
			eng.PreviousLive = !prev.Ended()
		}
	}
	e.list = append(e.list, eng)
	return nil
}

// of returns copies of the engagements of a member, oldest first.
func (e *engagements) of(name string) []engagement {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []engagement
	for _, eng := range e.list {
		if string(eng.Name) == name {
			out = append(out, *eng)
		}
	}
	return out
}

// names returns the names of every engaged member, in engagement order.
func (e *engagements) names() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, eng := range e.list {
		out = append(out, string(eng.Name))
	}
	return out
}

// userKubeconfig provisions a new system:masters user in cp and returns its kubeconfig: another
// valid credential for the same cluster.
func userKubeconfig(t *testing.T, cp *controlplane.ControlPlane, user string) []byte {
	t.Helper()
	cfg, err := cp.AddUser(user, []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := controlplane.KubeconfigFor(cp.Name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// editKubeconfig returns cp's admin kubeconfig changed by edit.
func editKubeconfig(t *testing.T, cp *controlplane.ControlPlane, edit func(*clientcmdapi.Config)) []byte {
	t.Helper()
	kc, err := clientcmd.Load(cp.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	edit(kc)
	out, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kubeconfigFor returns cp's admin kubeconfig with its server moved to addr (host:port).
func kubeconfigFor(t *testing.T, cp *controlplane.ControlPlane, addr string) []byte {
	t.Helper()
	return editKubeconfig(t, cp, func(kc *clientcmdapi.Config) { kc.Clusters[cp.Name].Server = "https://" + addr })
}

// closedPort returns a 127.0.0.1 address nothing listens on: connecting is refused at once.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// fakeServer is a netproxy.BlackHole on 127.0.0.1 that is no API server: it either holds
// every connection open without a word (a black hole) or closes each one as soon as it accepts
// it. It records when it accepted each connection, and is closed when the test ends.
type fakeServer struct {
	*netproxy.BlackHole
	addr string
}

func newFakeServer(t *testing.T, start func() (*netproxy.BlackHole, error)) *fakeServer {
	t.Helper()
	h, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return &fakeServer{BlackHole: h, addr: h.Addr()}
}

// blackHole accepts connections and never answers.
func blackHole(t *testing.T) *fakeServer { return newFakeServer(t, netproxy.StartBlackHole) }

// slammingDoor accepts connections and closes them at once.
func slammingDoor(t *testing.T) *fakeServer { return newFakeServer(t, netproxy.StartSlammingDoor) }

// acceptedAt returns when the server accepted each connection so far.
func (s *fakeServer) acceptedAt() []time.Time { return s.AcceptedAt() }

// accepted polls how many connections the server accepted.
func (s *fakeServer) accepted() func() int { return s.Accepted }

// clusterID reads the uid of kube-system of cp, by which the provider knows a cluster.
func clusterID(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	ns := &corev1.Namespace{}
	if err := memberClients[cp].Get(context.Background(), client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		t.Fatal(err)
	}
	return string(ns.UID)
}

// serverVersion reads the gitVersion of cp.
func serverVersion(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := disc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.GitVersion
}

// writtenByHub lists every object of cp (of every resource that can be listed) with fields
// managed by the hub's field owner, with its resourceVersion: what the hub wrote there.
func writtenByHub(ctx context.Context, cfg *rest.Config) (map[string]string, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{} // deprecated kinds are listed too
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		return nil, err
	}
	written := map[string]string{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range list.APIResources {
			if !strings.Contains(strings.Join(r.Verbs, ","), "list") || strings.Contains(r.Name, "/") {
				continue
			}
			objs, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", r.Name, err)
			}
			for _, o := range objs.Items {
				for _, mf := range o.GetManagedFields() {
					if mf.Manager == hubv1alpha1.FieldOwner {
						written[r.Name+"."+gv.Group+" "+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
					}
				}
			}
		}
	}
	return written, nil
}
