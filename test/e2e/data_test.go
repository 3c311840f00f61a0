package e2e

import (
	"context"
	"maps"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// TestBundleDataInAMember: the hub process keeps a ConfigBundle with spec.data in a member (the
// CRD it installed there has data): every data key is in the ConfigMap beside message; a foreign
// key added by hand is removed, a key changed by hand and a key removed by hand are healed, each
// counted as a heal in the bundle's status; a data key message is refused at admission; and an
// immutable bundle's data is frozen: its ConfigMap holds it, admission refuses a change of it,
// and the ConfigMap stays the one published.
func TestBundleDataInAMember(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	const member, ns = "m1", "bundle-data"
	joined(t, member)
	ensureNamespace(g, member, ns)
	c := fl.Member(member).Client
	data := map[string]configbundlev1alpha1.DataValue{"app.properties": "color=blue\nsize=3\n", "log-level": "debug", "EMPTY": ""}
	want := map[string]string{"message": "hello", "app.properties": "color=blue\nsize=3\n", "log-level": "debug", "EMPTY": ""}

	b := fleet.NewBundle(ns, "web", "hello")
	b.Spec.Data = data
	g.Expect(c.Create(ctx, b)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), b) })
	g.Eventually(configMapData(c, b)).WithTimeout(timeout).WithPolling(interval).Should(Equal(want), "every key in the ConfigMap")

	for i, tt := range []struct {
		name   string
		tamper func(map[string]string)
	}{
		{"a foreign key added", func(d map[string]string) { d["foreign"] = "added by hand" }},
		{"a key changed by hand", func(d map[string]string) { d["log-level"] = "trace" }},
		{"a key removed by hand", func(d map[string]string) { delete(d, "app.properties") }},
	} {
		g.Expect(editConfigMapData(ctx, c, b, tt.tamper)).To(Succeed(), tt.name)
		g.Eventually(func(g Gomega) {
			g.Expect(configMapData(c, b)(g)).To(Equal(want))
			got := &configbundlev1alpha1.ConfigBundle{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
			g.Expect(got.Status.Heals).To(BeEquivalentTo(i + 1))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "%s: healed", tt.name)
	}

	refused := fleet.NewBundle(ns, "refused", "hello")
	refused.Spec.Data = map[string]configbundlev1alpha1.DataValue{"message": "from data"}
	err := c.Create(ctx, refused)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("data must not have the key message"))

	// Immutable: the data is frozen.
	frozen := fleet.NewBundle(ns, "frozen", "hello")
	frozen.Spec.Data, frozen.Spec.Immutable = data, true
	g.Expect(c.Create(ctx, frozen)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), frozen) })
	g.Eventually(configMapData(c, frozen)).WithTimeout(timeout).WithPolling(interval).Should(Equal(want))
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(frozen), cm)).To(Succeed())
	g.Expect(ptr.Deref(cm.Immutable, false)).To(BeTrue())
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &configbundlev1alpha1.ConfigBundle{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(frozen), got); err != nil {
			return err
		}
		got.Spec.Data["log-level"] = "trace"
		return c.Update(ctx, got)
	})
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec is immutable"))
	g.Consistently(func(g Gomega) {
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(frozen), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(cm.UID))
		g.Expect(got.Data).To(Equal(want))
	}).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed(), "the immutable ConfigMap stays the one published")
}

// configMapData polls the data of a bundle's ConfigMap.
func configMapData(c client.Client, b *configbundlev1alpha1.ConfigBundle) func(Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(b), cm)).To(Succeed())
		return cm.Data
	}
}

// editConfigMapData changes the data of a bundle's ConfigMap, as another writer would, retrying
// on conflicts (with the hub's heals).
func editConfigMapData(ctx context.Context, c client.Client, b *configbundlev1alpha1.ConfigBundle, edit func(map[string]string)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), cm); err != nil {
			return err
		}
		cm.Data = maps.Clone(cm.Data)
		edit(cm.Data)
		return c.Update(ctx, cm)
	})
}
