package placement_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/suite"
	"configbundle.dev/hub/pkg/configbundle"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/placement"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Timeouts of the suite, generous for a loaded two-core machine.
const (
	// timeout bounds an Eventually: a placement, a removal, a status written.
	timeout = 30 * time.Second
	// interval is the polling interval of Eventually and Consistently.
	interval = 50 * time.Millisecond
	// quietPeriod is how long nothing may change for a Consistently; longer than the retries of
	// the suite's Options, so that a retry would be seen.
	quietPeriod = 2 * time.Second
)

// The suite runs one hub and three members, each a real control plane, and on the hub a real
// manager with placement and the ConfigBundle reconciler (which makes the placed bundles Ready),
// over multicluster-runtime's clusters provider. Members plays the spoke provider: every member
// is engaged and Ready unless a test says otherwise. No MemberCluster controller runs: the suite
// creates one MemberCluster per member, and the tests label them. The suite creates the
// ClusterSet fleet.GlobalClusterSet (every member), which newNamespace binds into the namespaces
// it creates.
const (
	memberA = "member-a"
	memberB = "member-b"
	memberC = "member-c"
)

var (
	scheme *runtime.Scheme
	hub    client.Client
	// memberClients are uncached clients of the members, by name.
	memberClients map[string]client.Client
	members       *suite.Members
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
	planes, err := suite.HubAndMembers(memberA, memberB, memberC)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return suite.Run(m, suite.Options{Planes: planes, Setup: setUp})
}

// setUp engages the members, creates their MemberClusters and starts the hub's manager.
func setUp(ctx, startCtx context.Context, cps []*controlplane.ControlPlane) error {
	var err error
	if hub, err = client.New(cps[0].Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	h, err := suite.NewHub(ctx, cps, scheme, configbundle.ConfigureCache)
	if err != nil {
		return err
	}
	memberClients = h.Clients
	mgr := h.Manager
	members = suite.NewMembers(h.Provider)
	if err := hub.Create(startCtx, fleet.NewClusterSet(fleet.GlobalClusterSet, nil)); err != nil {
		return fmt.Errorf("creating ClusterSet %s: %w", fleet.GlobalClusterSet, err)
	}
	for _, cp := range cps[1:] {
		members.Set(cp.Name, connected())
		mc := &hubv1alpha1.MemberCluster{
			ObjectMeta: metav1.ObjectMeta{Name: cp.Name},
			Spec:       hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: cp.Name}},
		}
		if err := hub.Create(startCtx, mc); err != nil {
			return fmt.Errorf("creating MemberCluster %s: %w", cp.Name, err)
		}
	}
	if _, err := configbundle.SetupWithManager(mgr, configbundle.Options{
		RetryBaseDelay: 100 * time.Millisecond,
		RetryMaxDelay:  time.Second,
		Connected:      members.Connected,
		ResyncOn:       members.OnReady,
		HubSources:     placement.HubSources(mgr.GetLocalManager().GetClient(), mgr.GetLocalManager().GetAPIReader()),
	}); err != nil {
		return err
	}
	if err := placement.SetupWithManager(mgr, members, placement.Options{
		NotConnectedRetry:     300 * time.Millisecond,
		NamespaceMissingRetry: 300 * time.Millisecond,
		RetryBaseDelay:        100 * time.Millisecond,
		RetryMaxDelay:         time.Second,
	}); err != nil {
		return err
	}
	if err := mgr.Add(members); err != nil { // engaged last, as the provider's members are
		return err
	}
	h.Start(ctx)
	return members.WaitEngaged(startCtx, memberA, memberB, memberC)
}

// connected is the State of a member the provider is connected to.
func connected() spokeprovider.State {
	return spokeprovider.State{Ready: true, Reason: hubv1alpha1.ConnectedReason, Message: "Connected"}
}

// newNamespace creates a namespace of its own for a test, of the same name in the hub and in
// the given members, and binds fleet.GlobalClusterSet into it: its FleetBundles may place into
// every member.
func newNamespace(t *testing.T, in ...string) string {
	t.Helper()
	ns := newUnboundNamespace(t, in...)
	bind(t, ns, fleet.GlobalClusterSet)
	return ns
}

// bind binds ClusterSet set into hub namespace ns.
func bind(t *testing.T, ns, set string) {
	t.Helper()
	if err := hub.Create(context.Background(), fleet.NewClusterSetBinding(ns, set)); err != nil {
		t.Fatalf("binding ClusterSet %s into %s: %v", set, ns, err)
	}
}

// newUnboundNamespace creates a namespace of its own for a test, of the same name in the hub and
// in the given members, into which no ClusterSet is bound.
func newUnboundNamespace(t *testing.T, in ...string) string {
	t.Helper()
	prefix := strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name()))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix[:min(40, len(prefix))] + "-"}}
	if err := hub.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	for _, m := range in {
		createNamespace(t, m, ns.Name)
	}
	return ns.Name
}

// createNamespace creates namespace ns in a member.
func createNamespace(t *testing.T, member, ns string) {
	t.Helper()
	if err := memberClients[member].Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("creating namespace %s in %s: %v", ns, member, err)
	}
}

// labelMember sets label key=value on a member's MemberCluster; value "" removes it. A label
// set is removed when the test ends.
func labelMember(t *testing.T, member, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &hubv1alpha1.MemberCluster{}
		if err := hub.Get(context.Background(), client.ObjectKey{Name: member}, mc); err != nil {
			return err
		}
		if value == "" {
			delete(mc.Labels, key)
		} else {
			if mc.Labels == nil {
				mc.Labels = map[string]string{}
			}
			mc.Labels[key] = value
		}
		return hub.Update(context.Background(), mc)
	})
	if err != nil {
		t.Fatalf("labelling MemberCluster %s: %v", member, err)
	}
	if value != "" {
		t.Cleanup(func() { labelMember(t, member, key, "") })
	}
}

// selecting is a selector of the members labelled key=yes.
func selecting(key string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{key: "yes"}}
}

// newFleetBundle creates FleetBundle ns/web with selector and message, and deletes it (waiting
// until it is gone) when the test ends.
func newFleetBundle(t *testing.T, ns string, selector *metav1.LabelSelector, message string) *hubv1alpha1.FleetBundle {
	t.Helper()
	fb := &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector: selector,
			Template: hubv1alpha1.ConfigBundleTemplate{
				Metadata: hubv1alpha1.TemplateMetadata{Labels: map[string]string{"team": "platform"}, Annotations: map[string]string{"owner": "platform@example.com"}},
				Spec:     configbundlev1alpha1.ConfigBundleSpec{Message: message},
			},
		},
	}
	if err := hub.Create(context.Background(), fb); err != nil {
		t.Fatalf("creating FleetBundle: %v", err)
	}
	t.Cleanup(func() { deleteFleetBundle(NewWithT(t), fb) })
	return fb
}

// deleteFleetBundle deletes a FleetBundle and waits until it is gone (its finalizer released).
func deleteFleetBundle(g Gomega, fb *hubv1alpha1.FleetBundle) {
	g.Expect(client.IgnoreNotFound(hub.Delete(context.Background(), fb))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(hub.Get(context.Background(), client.ObjectKeyFromObject(fb), &hubv1alpha1.FleetBundle{}))
	}).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "FleetBundle %s/%s is gone", fb.Namespace, fb.Name)
}

// updateFleetBundle changes a FleetBundle's spec with edit.
func updateFleetBundle(g Gomega, fb *hubv1alpha1.FleetBundle, edit func(*hubv1alpha1.FleetBundleSpec)) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &hubv1alpha1.FleetBundle{}
		if err := hub.Get(context.Background(), client.ObjectKeyFromObject(fb), got); err != nil {
			return err
		}
		edit(&got.Spec)
		return hub.Update(context.Background(), got)
	})).To(Succeed())
}

// placed polls the bundle of a FleetBundle's namespace and name in a member (nil if none).
func placed(member string, fb *hubv1alpha1.FleetBundle) func(Gomega) *configbundlev1alpha1.ConfigBundle {
	return func(g Gomega) *configbundlev1alpha1.ConfigBundle {
		b := &configbundlev1alpha1.ConfigBundle{}
		err := memberClients[member].Get(context.Background(), client.ObjectKeyFromObject(fb), b)
		if apierrors.IsNotFound(err) {
			return nil
		}
		g.Expect(err).NotTo(HaveOccurred())
		return b
	}
}

// message polls the message of the bundle of a FleetBundle in a member ("" if none).
func message(member string, fb *hubv1alpha1.FleetBundle) func(Gomega) string {
	return func(g Gomega) string {
		if b := placed(member, fb)(g); b != nil {
			return b.Spec.Message
		}
		return ""
	}
}

// status polls a FleetBundle's status.
func status(fb *hubv1alpha1.FleetBundle) func(Gomega) hubv1alpha1.FleetBundleStatus {
	return fleet.FleetBundleStatus(hub, fb)
}

// haveCounts matches a FleetBundle status with counts.
func haveCounts(counts hubv1alpha1.PlacementCounts) OmegaMatcher {
	return HaveField("Clusters", counts)
}

// failedCluster matches a failedClusters entry of a member with reason.
func failedCluster(member, reason string) OmegaMatcher {
	return And(HaveField("Cluster", member), HaveField("Reason", reason))
}

// healEvents polls the notes of the PlacedBundleHealed Events on a FleetBundle.
func healEvents(fb *hubv1alpha1.FleetBundle) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(hub.List(context.Background(), list, client.InNamespace(fb.Namespace))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "FleetBundle" && e.Regarding.Name == fb.Name && e.Reason == hubv1alpha1.PlacedBundleHealedEvent {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
}

// deleteWithConfigMap deletes a member's bundle and its ConfigMap, as the garbage collector
// these members lack would.
func deleteWithConfigMap(g Gomega, member string, b *configbundlev1alpha1.ConfigBundle) {
	ctx := context.Background()
	g.Expect(memberClients[member].Delete(ctx, b, client.Preconditions{UID: &b.UID})).To(Succeed())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name}}
	g.Expect(client.IgnoreNotFound(memberClients[member].Delete(ctx, cm))).To(Succeed())
}

// setFinalizers sets the finalizers of the bundle of a FleetBundle in a member.
func setFinalizers(g Gomega, member string, fb *hubv1alpha1.FleetBundle, finalizers []string) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b := &configbundlev1alpha1.ConfigBundle{}
		if err := memberClients[member].Get(context.Background(), client.ObjectKeyFromObject(fb), b); err != nil {
			return err
		}
		b.Finalizers = finalizers
		return memberClients[member].Update(context.Background(), b)
	})).To(Succeed())
}
