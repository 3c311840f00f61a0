package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// handEditor is the field manager and User-Agent of a hand edit, as kubectl edit names itself.
const handEditor = "kubectl-edit"

// TestReportShowsDriftAndWritesNothing: a bundle with driftPolicy Report whose ConfigMap is
// edited by hand is reported Drifted, naming the edit's field manager, on the bundle, on its
// MemberCluster and by `hub status`, and the hub writes nothing to the ConfigMap (the member's
// audit log); switched to Heal, it is healed with one write.
func TestReportShowsDriftAndWritesNothing(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	joined(t, quietMember)
	member := fl.Member(quietMember)
	ns := "drift-report"
	ensureNamespace(g, quietMember, ns)
	t.Cleanup(func() { g.Expect(fleet.DeleteBundles(ctx, member.Client, ns, timeout)).To(Succeed()) })
	b := fleet.NewBundle(ns, "settings", "as the bundle says")
	b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyReport
	g.Expect(member.Client.Create(ctx, b)).To(Succeed())
	g.Eventually(bundleReady(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal("True/" + configbundlev1alpha1.SyncedReason))

	cfg := rest.CopyConfig(member.Config)
	cfg.UserAgent = handEditor
	editor, err := client.New(cfg, client.Options{Scheme: member.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	edited := time.Now()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b.Name}}
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := editor.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		cm.Data[configbundlev1alpha1.MessageKey] = "by hand"
		return editor.Update(ctx, cm, client.FieldOwner(handEditor))
	})).To(Succeed())

	g.Eventually(bundleReady(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal("False/" + configbundlev1alpha1.DriftedReason))
	g.Expect(b.Status.Drift).NotTo(BeNil())
	g.Expect(b.Status.Drift.Fields).To(Equal([]string{"data.message changed"}))
	g.Expect(b.Status.Drift.ChangedBy).To(HavePrefix(handEditor + " Update "))
	g.Expect(meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition).Message).To(ContainSubstring(handEditor + " Update "))
	g.Eventually(fl.MemberCluster(quietMember)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Status.Bundles.Drifted", BeEquivalentTo(1)))
	g.Eventually(func() string {
		code, out := hubStatus(t)
		return fmt.Sprintf("%d %s", code, out)
	}).WithTimeout(timeout).WithPolling(interval).Should(And(HavePrefix("1 "), ContainSubstring(quietMember+":"+ns+"/"+b.Name)))

	g.Consistently(func(g Gomega) string { return member.Message(b)(g) }).WithTimeout(quietPeriod).WithPolling(interval).Should(Equal("by hand"))
	auditBarrier(g, quietMember)
	g.Expect(hubWritesOf(g, cm, edited)).To(BeEmpty(), "the hub writes nothing to a drifted ConfigMap in Report")

	switched := time.Now()
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := member.Client.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Spec.DriftPolicy = configbundlev1alpha1.DriftPolicyHeal
		return member.Client.Update(ctx, b)
	})).To(Succeed())
	g.Eventually(bundleReady(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal("True/" + configbundlev1alpha1.SyncedReason))
	g.Expect(b.Status.Heals).To(BeEquivalentTo(1))
	g.Expect(member.Message(b)(g)).To(Equal("as the bundle says"))
	auditBarrier(g, quietMember)
	g.Expect(hubWritesOf(g, cm, switched)).To(HaveLen(1), "one write heals")
}

// bundleReady reads b afresh and returns its Ready status and reason for its generation.
func bundleReady(b *configbundlev1alpha1.ConfigBundle) func(Gomega) string {
	return func(g Gomega) string {
		g.Expect(fl.Member(quietMember).Client.Get(context.Background(), client.ObjectKeyFromObject(b), b)).To(Succeed())
		c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition)
		if c == nil || c.ObservedGeneration != b.Generation {
			return "not observed yet"
		}
		return string(c.Status) + "/" + c.Reason
	}
}

// hubWritesOf returns the writes of cm that quietMember served since since and that came from
// anyone but the hand editor, as "verb at".
func hubWritesOf(g Gomega, cm *corev1.ConfigMap, since time.Time) []string {
	writes, err := fl.Member(quietMember).Plane.Writes()
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, w := range fleet.WritesSince(writes, since) {
		if w.Resource == "configmaps" && w.Namespace == cm.Namespace && w.Name == cm.Name && !strings.HasPrefix(w.UserAgent, handEditor) {
			out = append(out, w.Verb+" by "+w.UserAgent+" at "+w.At.Format(time.StampMilli))
		}
	}
	return out
}
