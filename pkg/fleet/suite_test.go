package fleet_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/suite"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/fleet"
	"configbundle.dev/hub/pkg/hubmanager"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Timeouts of the suite, generous for a loaded two-core machine.
const (
	// timeout bounds an Eventually: a MemberCluster or Fleet status written, a MemberCluster
	// created or deleted.
	timeout = 30 * time.Second
	// interval is the polling interval of Eventually.
	interval = 50 * time.Millisecond
	// heartbeatInterval is the suite's Options.HeartbeatInterval.
	heartbeatInterval = time.Second
)

// The suite runs one hub and two members, each a real control plane, and on the hub a real
// manager with the MemberCluster and Fleet controllers over multicluster-runtime's clusters
// provider, both members engaged. Members plays the spoke provider: a test makes a member known
// (its Secret and its State) and sets its State as the provider would.
const (
	memberA = "member-a"
	memberB = "member-b"
	// secretNamespace is the hub namespace of the members' Secrets.
	secretNamespace = hubv1alpha1.DefaultSecretNamespace
)

var (
	scheme *runtime.Scheme
	hub    client.Client
	// memberClients are uncached clients of the members, by name.
	memberClients map[string]client.Client
	members       *suite.Members
	// syncs plays the ConfigBundle reconciler's progress with each member (Options.Sync).
	syncs = newSyncs()
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	var err error
	if scheme, err = hubmanager.Scheme(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	planes, err := suite.HubAndMembers(memberA, memberB)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return suite.Run(m, suite.Options{Planes: planes, Setup: setUp})
}

// setUp engages the members, creates the Secret namespace and starts the hub's manager.
func setUp(ctx, startCtx context.Context, cps []*controlplane.ControlPlane) error {
	var err error
	if hub, err = client.New(cps[0].Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if err := hub.Create(startCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}}); err != nil {
		return err
	}
	h, err := suite.NewHub(ctx, cps, scheme, nil)
	if err != nil {
		return err
	}
	memberClients = h.Clients
	mgr := h.Manager
	members = suite.NewMembers(h.Provider)
	if err := fleet.SetupWithManager(mgr, members, secretNamespace, fleet.Options{HeartbeatInterval: heartbeatInterval, Sync: syncs.get}); err != nil {
		return err
	}
	if err := mgr.Add(members); err != nil { // engaged last, as the provider's members are
		return err
	}
	h.Start(ctx)
	return members.WaitEngaged(startCtx, memberA, memberB)
}

// connected is the State of a member the provider is connected to, whose credential expires
// in expiresIn (never, if zero).
func connected(name string, expiresIn time.Duration) spokeprovider.State {
	s := spokeprovider.State{
		Ready: true, Reason: hubv1alpha1.ConnectedReason, Message: "Connected",
		KubernetesVersion: "v1.36.3", ClusterID: "uid-" + name, LastSeen: time.Now(),
		SecretNamespace: secretNamespace, SecretName: name,
	}
	if expiresIn != 0 {
		s.CredentialsExpiry = time.Now().Add(expiresIn).Truncate(time.Second)
	}
	return s
}

// unreachable is a connected State that stopped answering.
func unreachable(s spokeprovider.State) spokeprovider.State {
	s.Ready, s.Reason, s.Message = false, hubv1alpha1.UnreachableReason, "Probe failed"
	return s
}

// join makes a member known, as the provider does once it admits the member's Secret: the
// Secret, then its State. When the test ends the member leaves and its MemberCluster is gone.
func join(t *testing.T, name string, state spokeprovider.State) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: name}}
	if err := hub.Create(context.Background(), secret); err != nil {
		t.Fatalf("creating the Secret of %s: %v", name, err)
	}
	members.Set(name, state)
	t.Cleanup(func() { leave(NewWithT(t), name) })
}

// leave deletes a member's Secret, makes it unknown and waits until its MemberCluster is gone.
func leave(g Gomega, name string) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNamespace, Name: name}}
	g.Expect(client.IgnoreNotFound(hub.Delete(context.Background(), secret))).To(Succeed())
	members.Forget(name)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(hub.Get(context.Background(), client.ObjectKey{Name: name}, &hubv1alpha1.MemberCluster{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "MemberCluster %s is deleted", name)
}

// memberCluster polls a member's MemberCluster.
func memberCluster(name string) func(Gomega) *hubv1alpha1.MemberCluster {
	return func(g Gomega) *hubv1alpha1.MemberCluster {
		mc := &hubv1alpha1.MemberCluster{}
		g.Expect(hub.Get(context.Background(), client.ObjectKey{Name: name}, mc)).To(Succeed())
		return mc
	}
}

// memberStatus polls a member's MemberCluster status.
func memberStatus(name string) func(Gomega) hubv1alpha1.MemberClusterStatus {
	return func(g Gomega) hubv1alpha1.MemberClusterStatus { return memberCluster(name)(g).Status }
}

// fleetStatus polls the Fleet's status.
func fleetStatus(g Gomega) hubv1alpha1.FleetStatus {
	f := &hubv1alpha1.Fleet{}
	g.Expect(hub.Get(context.Background(), client.ObjectKey{Name: hubv1alpha1.FleetName}, f)).To(Succeed())
	return f.Status
}

// haveCondition matches conditions holding one of type t with status and reason.
var haveCondition = suite.HaveCondition

// memberEvents polls the Events on a member's MemberCluster, as "type reason note".
func memberEvents(name string) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(hub.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "MemberCluster" && e.Regarding.Name == name {
				out = append(out, strings.Join([]string{e.Type, e.Reason, e.Note}, " "))
			}
		}
		return out
	}
}

// newBundle creates a ConfigBundle in a namespace of its own in a member, with a Ready
// condition of status and reason as its reconciler would write it, and deletes it when the test
// ends.
func newBundle(t *testing.T, member, name string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	g, ctx, c := NewWithT(t), context.Background(), memberClients[member]
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bundles-"}}
	g.Expect(c.Create(ctx, ns)).To(Succeed())
	b := &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
		Spec:       configbundlev1alpha1.ConfigBundleSpec{Message: "hello"},
	}
	g.Expect(c.Create(ctx, b)).To(Succeed())
	b.Status.ObservedGeneration = b.Generation
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: configbundlev1alpha1.ReadyCondition, Status: status, Reason: reason, Message: "set by the test", ObservedGeneration: b.Generation,
	})
	g.Expect(c.Status().Update(ctx, b)).To(Succeed())
	t.Cleanup(func() { g.Expect(client.IgnoreNotFound(c.Delete(ctx, b))).To(Succeed()) })
}

// syncProgress is the ConfigBundle reconciler's progress with each member, as a test sets it:
// a member connected and synced unless a test says otherwise.
type syncProgress struct {
	mu sync.Mutex
	m  map[multicluster.ClusterName]configbundle.Sync
}

func newSyncs() *syncProgress {
	return &syncProgress{m: map[multicluster.ClusterName]configbundle.Sync{}}
}

// get is the progress with member name.
func (s *syncProgress) get(name multicluster.ClusterName) configbundle.Sync {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.m[name]; ok {
		return p
	}
	return configbundle.Sync{Connected: true}
}

// set makes p the progress with member name until the test ends.
func (s *syncProgress) set(t *testing.T, name string, p configbundle.Sync) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[multicluster.ClusterName(name)] = p
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.m, multicluster.ClusterName(name))
	})
}
