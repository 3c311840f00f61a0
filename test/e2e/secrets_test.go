package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/template"
)

// putHubSecret writes hub Secret ns/pull, labelled as a FleetBundle source, with token.
func putHubSecret(g Gomega, ns, token string) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}}
	_, err := controllerutil.CreateOrUpdate(context.Background(), fl.Hub, s, func() error {
		s.Labels = map[string]string{hubv1alpha1.SourceLabel: "true"}
		s.Data = map[string][]byte{"token": []byte(token)}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
}

// tokens returns, for each member, the token of Secret key there ("" if none).
func tokens(key client.ObjectKey, members ...string) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		out := map[string]string{}
		for _, m := range members {
			s := &corev1.Secret{}
			err := fl.Member(m).Client.Get(context.Background(), key, s)
			if !apierrors.IsNotFound(err) {
				g.Expect(err).NotTo(HaveOccurred())
			}
			out[m] = string(s.Data["token"])
		}
		return out
	}
}

// TestSecretSourceStaysInSecrets: a labelled hub Secret becomes a Secret in each selected member,
// healed after an edit; a change of it rolls out as a new revision, and `hub rollout undo`
// restores the earlier one; a hand-written target Secret bundle that names the FleetBundle from a
// member it does not select, or from another namespace, gets SourceNotFound and no Secret write;
// the bundle goes with the FleetBundle. No object of the hub or the members, nor the hub's log
// or metrics, ever holds a value.
func TestSecretSourceStaysInSecrets(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const key, ns, other = "e2e.secrets/pull", "secrets-pull", "secrets-other"
	start := time.Now()
	markers := []string{fmt.Sprintf("marker-one-%d", start.UnixNano()), fmt.Sprintf("marker-two-%d", start.UnixNano())}
	rolloutMembers(t, "ro1", "ro2", "ro3")
	for _, m := range []string{"ro1", "ro2", "ro3"} {
		ensureNamespace(g, m, ns)
	}
	ensureNamespace(g, "ro1", other)
	selectMember(t, "ro1", key, "yes")
	selectMember(t, "ro2", key, "yes")
	fl.MustBindGlobal(t, ns)
	putHubSecret(g, ns, markers[0])
	t.Cleanup(func() {
		_ = fl.Hub.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"}})
	})
	fb := fleet.NewFleetBundle(ns, "web", map[string]string{key: "yes"}, configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret})
	fb.Spec.DataFrom = []hubv1alpha1.DataFromSource{{SecretRef: &hubv1alpha1.SourceReference{Name: "pull"}}}
	g.Expect(fl.Hub.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { deleteFleetBundle(g, fb) })
	fbKey := client.ObjectKeyFromObject(fb)
	g.Eventually(tokens(fbKey, "ro1", "ro2", "ro3")).WithTimeout(timeout).WithPolling(interval).Should(
		Equal(map[string]string{"ro1": markers[0], "ro2": markers[0], "ro3": ""}))

	// An edit in a member is healed.
	edited := &corev1.Secret{}
	g.Expect(fl.Member("ro1").Client.Get(ctx, fbKey, edited)).To(Succeed())
	edited.Data["token"] = []byte("edited")
	g.Expect(fl.Member("ro1").Client.Update(ctx, edited)).To(Succeed())
	g.Eventually(tokens(fbKey, "ro1")).WithTimeout(timeout).WithPolling(interval).Should(Equal(map[string]string{"ro1": markers[0]}))

	// A change of the source is revision 2; undo restores revision 1 while the source holds 2.
	putHubSecret(g, ns, markers[1])
	g.Eventually(tokens(fbKey, "ro1", "ro2")).WithTimeout(timeout).WithPolling(interval).Should(
		Equal(map[string]string{"ro1": markers[1], "ro2": markers[1]}))
	g.Eventually(fleetBundleStatus(fb)).WithTimeout(timeout).WithPolling(interval).Should(HaveField("ObservedRevision", BeEquivalentTo(2)))
	code, _, _ := hubCommand(t, "rollout", "undo", "web", "-n", ns, "--hub-kubeconfig", fl.HubPlane.KubeconfigPath)
	g.Expect(code).To(Equal(0))
	g.Eventually(tokens(fbKey, "ro1", "ro2")).WithTimeout(timeout).WithPolling(interval).Should(
		Equal(map[string]string{"ro1": markers[0], "ro2": markers[0]}))

	// Hand-written bundles naming the FleetBundle: in ro3, which it does not select, and in
	// another namespace of ro1.
	handWritten := time.Now()
	real := placed("ro1", fb)(g)
	forged := map[string]*configbundlev1alpha1.ConfigBundle{
		"ro3": {ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: real.Spec},
		"ro1": {ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "web"}, Spec: real.Spec},
	}
	for m, b := range forged {
		g.Expect(fl.Member(m).Client.Create(ctx, b)).To(Succeed())
		t.Cleanup(func() { _ = fl.Member(m).Client.Delete(context.Background(), b) })
	}
	for m, b := range forged {
		g.Eventually(func(g Gomega) string {
			g.Expect(fl.Member(m).Client.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
			if c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition); c != nil {
				return c.Reason
			}
			return ""
		}).WithTimeout(timeout).WithPolling(interval).Should(Equal(configbundlev1alpha1.SourceNotFoundReason), m)
		writes, err := fl.Member(m).Plane.Writes()
		g.Expect(err).NotTo(HaveOccurred())
		for _, w := range fleet.WritesSince(writes, handWritten) {
			g.Expect(w.Resource == "secrets" && w.Namespace == b.Namespace && w.Name == b.Name).To(BeFalse(), "a Secret write in %s: %+v", m, w)
		}
	}

	g.Expect(valuesAnywhere(g, markers)).To(BeEmpty())
	snapshot := &corev1.Secret{}
	g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: template.SnapshotName("web", 1)}, snapshot)).To(Succeed())
	g.Expect(holdsMarker(g, snapshot, markers)).To(BeTrue(), "the values live in Secrets: the hub's snapshot of revision 1")

	// The placed bundle goes with the FleetBundle; its Secret, which it controls, with it.
	secret := &corev1.Secret{}
	g.Expect(fl.Member("ro1").Client.Get(ctx, fbKey, secret)).To(Succeed())
	g.Expect(metav1.GetControllerOf(secret).UID).To(Equal(placed("ro1", fb)(g).UID))
	deleteFleetBundle(g, fb)
	g.Eventually(placed("ro1", fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil())
	g.Eventually(placed("ro2", fb)).WithTimeout(timeout).WithPolling(interval).Should(BeNil())
}

// valuesAnywhere returns where the markers appear: in an object the hub or a member holds
// (FleetBundles, ControllerRevisions, MemberClusters, ConfigBundles, Events), in the hub's log
// or in its metrics.
func valuesAnywhere(g Gomega, markers []string) []string {
	ctx := context.Background()
	var found []string
	lists := func(c client.Client, where string, lists ...client.ObjectList) {
		for _, list := range append(lists, &eventsv1.EventList{}, &corev1.EventList{}) {
			g.Expect(c.List(ctx, list)).To(Succeed())
			if holdsMarker(g, list, markers) {
				found = append(found, fmt.Sprintf("%s %T", where, list))
			}
		}
	}
	lists(fl.Hub, "hub", &hubv1alpha1.FleetBundleList{}, &appsv1.ControllerRevisionList{}, &hubv1alpha1.MemberClusterList{})
	for _, m := range []string{"ro1", "ro2", "ro3"} {
		lists(fl.Member(m).Client, m, &configbundlev1alpha1.ConfigBundleList{})
	}
	log, err := os.ReadFile(fl.LogPath(fleet.HubName))
	g.Expect(err).NotTo(HaveOccurred())
	metrics, err := fl.ScrapeHub(fleet.HubName)
	g.Expect(err).NotTo(HaveOccurred())
	for where, text := range map[string]string{"hub log": string(log), "hub metrics": metrics} {
		if holdsMarker(g, text, markers) {
			found = append(found, where)
		}
	}
	return found
}

// holdsMarker reports whether v, as JSON, holds one of the markers, as written or in base64 (as
// a Secret's data is encoded).
func holdsMarker(g Gomega, v any, markers []string) bool {
	raw, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range markers {
		if strings.Contains(string(raw), m) || strings.Contains(string(raw), base64.StdEncoding.EncodeToString([]byte(m))) {
			return true
		}
	}
	return false
}
