package configbundle_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/configbundle"
)

// TestAdmission runs the CRD's rules against a real API server (member-a serves the CRD as
// generated).
func TestAdmission(t *testing.T) {
	t.Parallel()
	c := members[memberA]
	ns := newNamespace(t, memberA)
	max := configbundlev1alpha1.MaxMessageBytes
	// The largest message of characters that take 6 bytes once JSON-escaped (<, \u003c).
	maxEscaped := configbundlev1alpha1.MaxEscapedMessageBytes / 6
	// The error of a message that does not fit in etcd once escaped. It names the field and does
	// not quote the message (that would read `Invalid value: "<<<…"`).
	const tooLargeToStore = "spec.message: Invalid value: message is too large to store: at most 1310720 bytes once JSON-escaped"
	// The errors of spec.data's rules: they name the field and quote no value.
	const (
		dataKeyMessage      = "spec.data: Invalid value: data must not have the key message: spec.message is published as data.message"
		invalidDataKey      = "spec.data: Invalid value: every data key must be a valid ConfigMap key"
		dataTooLarge        = "spec.data: Invalid value: message and data together must fit in a ConfigMap: at most 1048576 bytes of UTF-8"
		dataTooLargeToStore = "spec.data: Invalid value: message and data together are too large to store: at most 1310720 bytes once JSON-escaped"
	)
	tests := []struct {
		name    string
		spec    configbundlev1alpha1.ConfigBundleSpec
		update  func(*configbundlev1alpha1.ConfigBundleSpec)
		wantErr string
		// overBudget: a rule may run out of its cost budget on the refused spec.
		overBudget bool
	}{
		{name: "largest message that fits a ConfigMap", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("a", max)}},
		{name: "largest message that fits in etcd once escaped", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("<", maxEscaped)}},
		{name: "one byte too many", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("a", max+1)}, wantErr: "spec.message"},
		{name: "too many bytes in fewer characters", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("é", max/2+1)}, wantErr: "must fit in a ConfigMap"},
		// 1.6 MB once escaped, which etcd would refuse with "etcdserver:
		// request is too large", an error that names nothing.
		{name: "270000 characters of < do not fit in etcd", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("<", 270000)}, wantErr: tooLargeToStore},
		{name: "one character of < too many", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("<", maxEscaped+1)}, wantErr: tooLargeToStore},
		{name: "control characters take 6 bytes", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("\x01", maxEscaped+1)}, wantErr: tooLargeToStore},
		{name: "U+2028 takes 6 bytes", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("\u2028", maxEscaped+1)}, wantErr: tooLargeToStore},
		{name: "newlines take 2 bytes", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("\n", configbundlev1alpha1.MaxEscapedMessageBytes/2+1)}, wantErr: tooLargeToStore},
		{name: "largest message of newlines", spec: configbundlev1alpha1.ConfigBundleSpec{Message: strings.Repeat("\n", configbundlev1alpha1.MaxEscapedMessageBytes/2)}},
		{name: "an update too large to store", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a"},
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Message = strings.Repeat("&", 270000) }, wantErr: tooLargeToStore},
		{name: "mutable spec changes", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a"}, update: func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Message = "b" }},
		{name: "mutable to immutable with a new message", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a"},
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) {
				*s = configbundlev1alpha1.ConfigBundleSpec{Message: "b", Immutable: true}
			}},
		{name: "immutable message cannot change", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a", Immutable: true},
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Message = "b" }, wantErr: "spec is immutable"},
		{name: "immutable cannot be made mutable", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a", Immutable: true},
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Immutable = false }, wantErr: "spec is immutable"},

		// spec.data.
		{name: "data beside message", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"app.properties": "x=1", "log-level": "debug", "_K-1.v": ""})},
		{name: "data key message", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"message": "b"}), wantErr: dataKeyMessage},
		{name: "data key message beside others", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"k": "v", "message": "b"}), wantErr: dataKeyMessage},
		{name: "data key with a slash", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"a/b": "v"}), wantErr: invalidDataKey},
		{name: "data key starting with ..", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"..x": "v"}), wantErr: invalidDataKey},
		{name: "data key .", spec: withData("a", map[string]configbundlev1alpha1.DataValue{".": "v"}), wantErr: invalidDataKey},
		{name: "data key ..", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"..": "v"}), wantErr: invalidDataKey},
		{name: "data key with a space", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"a b": "v"}), wantErr: invalidDataKey},
		{name: "data key of 254 characters", spec: withData("a", map[string]configbundlev1alpha1.DataValue{strings.Repeat("k", 254): "v"}), wantErr: invalidDataKey},
		{name: "data key of 253 characters and one starting with a dot", spec: withData("a", map[string]configbundlev1alpha1.DataValue{strings.Repeat("k", 253): "v", ".x": "v"})},
		{name: "48 data keys", spec: withData("a", dataOf(configbundlev1alpha1.MaxDataKeys, 1, "v"))},
		{name: "49 data keys", spec: withData("a", dataOf(configbundlev1alpha1.MaxDataKeys+1, 1, "v")), wantErr: "spec.data: Too many: 49: must have at most 48 items"},
		{name: "a data value of 32 KiB", spec: withData("a", dataOf(1, configbundlev1alpha1.MaxDataValueBytes, "v"))},
		{name: "a data value of 32 KiB and a byte", spec: withData("a", dataOf(1, configbundlev1alpha1.MaxDataValueBytes+1, "v")),
			wantErr: "spec.data.k00: Too long: may not be more than 32768 bytes"},
		{name: "a data value of 32 KiB of characters, 64 KiB of bytes", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"k": configbundlev1alpha1.DataValue(strings.Repeat("é", configbundlev1alpha1.MaxDataValueBytes))}),
			wantErr: "every data value must be at most 32768 bytes of UTF-8"},
		{name: "message and data of 1 MiB together", spec: withData(strings.Repeat("a", max-2*configbundlev1alpha1.MaxDataValueBytes),
			dataOf(2, configbundlev1alpha1.MaxDataValueBytes, "v"))},
		{name: "message and data of 1 MiB and a byte together", spec: withData(strings.Repeat("a", max-2*configbundlev1alpha1.MaxDataValueBytes+1),
			dataOf(2, configbundlev1alpha1.MaxDataValueBytes, "v")), wantErr: dataTooLarge},
		{name: "32 data values of 32 KiB and no message", spec: withData("", dataOf(32, configbundlev1alpha1.MaxDataValueBytes, "v"))},
		{name: "1 MiB of data in 40 values", spec: withData("", dataOf(40, configbundlev1alpha1.MaxMessageBytes/40, "v"))},
		{name: "32 data values of 32 KiB and a message of one byte", spec: withData("a", dataOf(32, configbundlev1alpha1.MaxDataValueBytes, "v")),
			wantErr: dataTooLarge},
		// 1.5 MiB of data: the size rule refuses it; the escaped-size rule runs out of the API
		// server's cost budget on so much data (its error says so), which refuses it too.
		{name: "48 data values of 32 KiB", spec: withData("",
			dataOf(configbundlev1alpha1.MaxDataKeys, configbundlev1alpha1.MaxDataValueBytes, "a")), wantErr: dataTooLarge, overBudget: true},
		{name: "data at the escaped bound", spec: withData("", escapedData(maxEscaped))},
		{name: "data values full of < over the escaped bound", spec: withData("", escapedData(maxEscaped+1)), wantErr: dataTooLargeToStore},
		{name: "message and data over the escaped bound together", spec: withData(strings.Repeat("<", maxEscaped-maxEscaped/4),
			escapedData(maxEscaped/4+1)), wantErr: dataTooLargeToStore},
		{name: "data at the escaped bound in newlines", spec: withData("", dataOf(20, configbundlev1alpha1.MaxDataValueBytes, "\n"))},
		{name: "data over the escaped bound in newlines", spec: withData("", dataOf(21, configbundlev1alpha1.MaxDataValueBytes, "\n")),
			wantErr: dataTooLargeToStore},
		{name: "an update adding a data key message", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a"},
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) {
				s.Data = map[string]configbundlev1alpha1.DataValue{"message": "b"}
			}, wantErr: dataKeyMessage},
		{name: "mutable data changes", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"k": "v"}),
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) {
				s.Data = map[string]configbundlev1alpha1.DataValue{"k": "w", "l": "x"}
			}},
		{name: "immutable data value cannot change", spec: immutableData(), wantErr: "spec is immutable",
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data["k"] = "w" }},
		{name: "immutable data key cannot be added", spec: immutableData(), wantErr: "spec is immutable",
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data["l"] = "x" }},
		{name: "immutable data key cannot be removed", spec: immutableData(), wantErr: "spec is immutable",
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) { delete(s.Data, "k") }},
		{name: "immutable data cannot be dropped", spec: immutableData(), wantErr: "spec is immutable",
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) { s.Data = nil }},
		{name: "immutable data cannot be added", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a", Immutable: true}, wantErr: "spec is immutable",
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) {
				s.Data = map[string]configbundlev1alpha1.DataValue{"k": "v"}
			}},
		// spec.target.
		{name: "target Secret holds no value", spec: secretSpec()},
		{name: "target Secret with a message", spec: configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret, Message: "a"},
			wantErr: "a bundle with target Secret holds no values"},
		{name: "target Secret with data", spec: configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret, Data: map[string]configbundlev1alpha1.DataValue{"k": "v"}},
			wantErr: "a bundle with target Secret holds no values"},
		{name: "hubSource with target ConfigMap", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a", HubSource: secretSpec().HubSource},
			wantErr: "hubSource is set only with target Secret"},
		{name: "secretType with target Secret", spec: func() configbundlev1alpha1.ConfigBundleSpec {
			s := secretSpec()
			s.SecretType = configbundlev1alpha1.SecretTypeDockerConfigJSON
			return s
		}()},
		{name: "secretType with target ConfigMap", spec: configbundlev1alpha1.ConfigBundleSpec{Message: "a", SecretType: configbundlev1alpha1.SecretTypeOpaque},
			wantErr: "secretType is set only with target Secret"},
		{name: "secretType of no listed type", spec: func() configbundlev1alpha1.ConfigBundleSpec {
			s := secretSpec()
			s.SecretType = "kubernetes.io/service-account-token"
			return s
		}(), wantErr: "spec.secretType: Unsupported value"},
		{name: "immutable target Secret cannot change its hubSource", spec: func() configbundlev1alpha1.ConfigBundleSpec { s := secretSpec(); s.Immutable = true; return s }(),
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) { s.HubSource.Revision = 2 }, wantErr: "spec is immutable"},
		{name: "mutable to immutable with new data", spec: withData("a", map[string]configbundlev1alpha1.DataValue{"k": "v"}),
			update: func(s *configbundlev1alpha1.ConfigBundleSpec) {
				*s = configbundlev1alpha1.ConfigBundleSpec{Message: "a", Immutable: true, Data: map[string]configbundlev1alpha1.DataValue{"k": "w"}}
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, ctx := NewWithT(t), context.Background()
			b := newBundle(ns, fmt.Sprintf("admission-%02d", i), "")
			b.Spec = tt.spec
			err := c.Create(ctx, b)
			if tt.update != nil {
				g.Expect(err).NotTo(HaveOccurred())
				err = update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { tt.update(&b.Spec) })
			}
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tt.wantErr))
			g.Expect(err.Error()).NotTo(ContainSubstring("request is too large"))
			if !tt.overBudget {
				g.Expect(err.Error()).NotTo(ContainSubstring("cost limit"), "a rule ran out of its cost budget")
			}
		})
	}

	// Published: the largest data, with the bundle's status (written by the hub), fits in etcd
	// and in the ConfigMap, every key of it.
	for i, tt := range tests {
		if !slices.Contains([]string{"48 data keys", "message and data of 1 MiB together", "data at the escaped bound",
			"data at the escaped bound in newlines"}, tt.name) {
			continue
		}
		t.Run("the largest data is published/"+tt.name, func(t *testing.T) {
			g, ctx := NewWithT(t), context.Background()
			b := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("admission-%02d", i), Namespace: ns}}
			g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
			cm := configMapOf(b)
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveLen(len(tt.spec.Data) + 1))
			matchesBundle(g, b, cm)
		})
	}

	// Published: the bundle with its status (written by the hub) fits in etcd too.
	for i, want := range []string{strings.Repeat("a", max), strings.Repeat("<", maxEscaped)} {
		name := fmt.Sprintf("admission-%02d", i) // the first two rows of the table
		t.Run("the largest message is published/"+name, func(t *testing.T) {
			g, ctx := NewWithT(t), context.Background()
			b := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
			g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
			cm := configMapOf(b)
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
			g.Expect(cm.Data["message"] == want).To(BeTrue(), "the ConfigMap holds the message")
		})
	}
}

// withData returns a mutable spec of message and data.
func withData(message string, data map[string]configbundlev1alpha1.DataValue) configbundlev1alpha1.ConfigBundleSpec {
	return configbundlev1alpha1.ConfigBundleSpec{Message: message, Data: data}
}

// immutableData returns an immutable spec with a data key k.
func immutableData() configbundlev1alpha1.ConfigBundleSpec {
	return configbundlev1alpha1.ConfigBundleSpec{Message: "a", Immutable: true, Data: map[string]configbundlev1alpha1.DataValue{"k": "v"}}
}

// dataOf returns n data keys, k00 and on, each value count times unit.
func dataOf(n, count int, unit string) map[string]configbundlev1alpha1.DataValue {
	data := make(map[string]configbundlev1alpha1.DataValue, n)
	for i := range n {
		data[fmt.Sprintf("k%02d", i)] = configbundlev1alpha1.DataValue(strings.Repeat(unit, count))
	}
	return data
}

// escapedData returns data of n characters '<' in all (6 bytes each once JSON-escaped), in as
// few keys as the bound of a value allows.
func escapedData(n int) map[string]configbundlev1alpha1.DataValue {
	data := map[string]configbundlev1alpha1.DataValue{}
	for i := 0; n > 0; i++ {
		size := min(n, configbundlev1alpha1.MaxDataValueBytes)
		data[fmt.Sprintf("k%02d", i)] = configbundlev1alpha1.DataValue(strings.Repeat("<", size))
		n -= size
	}
	return data
}

// TestImmutableSpecIsRestored shows the reconciler's own guard where the CRD lacks the rule
// (member-b): the spec of an immutable bundle is restored from its ConfigMap, which is left
// alone, while label changes still reach it.
func TestImmutableSpecIsRestored(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberB]
	b := newBundle(newNamespace(t, memberB), "frozen-spec", "original")
	b.Spec.Immutable = true
	cm := createSynced(ctx, g, c, b)
	g.Expect(ptr.Deref(cm.Immutable, false)).To(BeTrue())

	for _, change := range []configbundlev1alpha1.ConfigBundleSpec{
		{Message: "changed", Immutable: true},
		{Message: "changed and unfrozen", Immutable: false},
	} {
		g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec = change })).To(Succeed(), "member-b's CRD has no rule to refuse this")
		g.Eventually(func(g Gomega) {
			g.Expect(get(ctx, c, b)(g).Spec).To(Equal(configbundlev1alpha1.ConfigBundleSpec{Message: "original", Immutable: true, DriftPolicy: configbundlev1alpha1.DriftPolicyHeal, TakeOver: configbundlev1alpha1.TakeOverNever}))
			g.Expect(b).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	}

	got := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(cm.UID))
	g.Expect(got.Data).To(Equal(map[string]string{"message": "original"}))
	g.Expect(b.Status.Heals).To(BeZero())
	g.Eventually(func() (int32, error) { return occurrences(ctx, c, b, configbundlev1alpha1.SpecRestoredEvent) }).
		WithTimeout(timeout).WithPolling(interval).Should(BeEquivalentTo(2), "two SpecRestored Events, or a series of two")

	// Labels and annotations still reach an immutable ConfigMap.
	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) {
		b.Labels = map[string]string{"tier": "gold"}
		b.Annotations = map[string]string{"note": "still mutable metadata"}
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), got)).To(Succeed())
		g.Expect(got.Labels).To(Equal(b.Labels))
		g.Expect(got.Annotations).To(Equal(b.Annotations))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(got.UID).To(Equal(cm.UID))
}

// TestInvalidConfigMapIsTerminal: where the CRD does not bound the message (member-b), the API
// server refuses the oversized ConfigMap. That is for the user to fix: Ready=False with the API's
// message, and no retry until the bundle changes.
func TestInvalidConfigMapIsTerminal(t *testing.T) {
	t.Parallel()
	g, ctx := NewWithT(t), context.Background()
	c := members[memberB]
	b := newBundle(newNamespace(t, memberB), "too-big", strings.Repeat("x", configbundlev1alpha1.MaxMessageBytes+1))
	g.Expect(c.Create(ctx, b)).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionFalse, configbundlev1alpha1.InvalidConfigMapReason))
	g.Expect(meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition).Message).To(ContainSubstring("may not be more than 1048576 bytes"))

	// Not retried: the member is asked for nothing more about the bundle, neither the ConfigMap
	// it refused nor a status write, until the bundle changes (the Events about it aside).
	since := time.Now()
	retries := func() []controlplane.Write {
		return slices.DeleteFunc(writesSince(t, memberB, b.Namespace, since), func(w controlplane.Write) bool { return w.Resource == "events" })
	}
	g.Consistently(retries).WithTimeout(quietPeriod).WithPolling(interval).Should(BeEmpty(), "a terminal error is not retried")

	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Message = "fits" })).To(Succeed())
	g.Eventually(get(ctx, c, b)).WithTimeout(timeout).WithPolling(interval).Should(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
}

// TestRefusedRestoreNeverPublishesTheSpec: where the CRD lacks the rule (member-b), an admission
// policy refuses the hub's restore of an immutable bundle's spec for a while. The forbidden spec
// must never reach the ConfigMap meanwhile, and the spec is restored once the refusal ends.
func TestRefusedRestoreNeverPublishesTheSpec(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	c := members[memberB]
	original := configbundlev1alpha1.ConfigBundleSpec{Message: "original", Immutable: true, DriftPolicy: configbundlev1alpha1.DriftPolicyHeal, TakeOver: configbundlev1alpha1.TakeOverNever}
	b := newBundle(newNamespace(t, memberB), "refused-restore", original.Message)
	b.Spec.Immutable = true
	cm := createSynced(ctx, g, c, b)

	binding := refuseSpecUpdatesByTheHub(ctx, t, c, b)
	g.Expect(update(ctx, c, b, func(b *configbundlev1alpha1.ConfigBundle) { b.Spec.Message = "forbidden" })).To(Succeed(), "the policy refuses the hub only")

	unchanged := func(g Gomega) {
		got := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cm), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(cm.UID), "the immutable ConfigMap was replaced")
		g.Expect(got.Data).To(Equal(map[string]string{"message": "original"}), "the forbidden spec was published")
	}
	g.Consistently(unchanged).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed(), "while the restore is refused")
	g.Eventually(func(g Gomega) {
		g.Expect(get(ctx, c, b)(g)).To(readyReason(metav1.ConditionFalse, configbundlev1alpha1.UpdateFailedReason))
		g.Expect(meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition).Message).To(ContainSubstring("restoring the spec"))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the refusal shows in the status")

	g.Expect(c.Delete(ctx, binding)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(ctx, c, b)(g).Spec).To(Equal(original))
		g.Expect(b).To(readyReason(metav1.ConditionTrue, configbundlev1alpha1.SyncedReason))
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed(), "the spec is restored once the refusal ends")
	g.Consistently(unchanged).WithTimeout(quietPeriod).WithPolling(interval).Should(Succeed(), "after the refusal")
	g.Expect(b.Status.Heals).To(BeZero())
	g.Expect(events(ctx, c, b, configbundlev1alpha1.SpecRestoredEvent)).To(HaveLen(1))
}

// refuseSpecUpdatesByTheHub installs a ValidatingAdmissionPolicy and its binding in the member:
// they refuse (Forbidden, a failure the reconciler retries) any update of the bundle's spec
// made with the hub's field manager, and nothing else. It returns once the refusal is in force,
// and returns the binding, whose deletion ends the refusal.
func refuseSpecUpdatesByTheHub(ctx context.Context, t *testing.T, c client.Client, b *configbundlev1alpha1.ConfigBundle) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	t.Helper()
	g := NewWithT(t)
	policy, binding := specRefusal(b)
	g.Expect(c.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), policy) })
	g.Expect(c.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(c.Delete(context.Background(), binding)) })

	// The API server loads policies asynchronously: probe with dry-run updates until the hub's
	// is refused. The test's own (no field manager) must pass.
	changed := func(g Gomega) *configbundlev1alpha1.ConfigBundle {
		probe := &configbundlev1alpha1.ConfigBundle{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(b), probe)).To(Succeed())
		probe.Spec.Message = "probe"
		return probe
	}
	g.Eventually(func(g Gomega) {
		err := c.Update(ctx, changed(g), client.DryRunAll, client.FieldOwner(configbundle.DefaultFieldOwner))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Expect(c.Update(ctx, changed(g), client.DryRunAll)).To(Succeed(), "the policy refuses the hub only")
	return binding
}

// specRefusal returns the policy and binding of refuseSpecUpdatesByTheHub. The policy tells the
// hub by the field manager of its request (request.options.fieldManager): in this suite the hub
// and the tests share the admin identity.
func specRefusal(b *configbundlev1alpha1.ConfigBundle) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	rule := admissionregistrationv1.Rule{
		APIGroups:   []string{configbundlev1alpha1.GroupVersion.Group},
		APIVersions: []string{configbundlev1alpha1.GroupVersion.Version},
		Resources:   []string{"configbundles"},
	}
	return updateRefusal("refuse-hub-spec-updates-"+b.Namespace, rule, []admissionregistrationv1.MatchCondition{
		{Name: "this-bundle", Expression: fmt.Sprintf("request.namespace == %q && request.name == %q", b.Namespace, b.Name)},
		{Name: "by-the-hub", Expression: fmt.Sprintf(
			"has(request.options) && has(request.options.fieldManager) && request.options.fieldManager == %q", configbundle.DefaultFieldOwner)},
	}, admissionregistrationv1.Validation{
		Expression: "object.spec == oldObject.spec",
		Message:    "the test refuses the hub's spec updates of this bundle",
		Reason:     ptr.To(metav1.StatusReasonForbidden),
	})
}

// updateRefusal returns a ValidatingAdmissionPolicy named name that refuses the UPDATEs of rule's
// resources that match conditions and fail validation, and its binding (Deny), of the same name.
func updateRefusal(name string, rule admissionregistrationv1.Rule, conditions []admissionregistrationv1.MatchCondition,
	validation admissionregistrationv1.Validation) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule:       rule,
					},
				}},
			},
			MatchConditions: conditions,
			Validations:     []admissionregistrationv1.Validation{validation},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding
}

// secretSpec is the spec of a bundle with target Secret, as the hub places it.
func secretSpec() configbundlev1alpha1.ConfigBundleSpec {
	return configbundlev1alpha1.ConfigBundleSpec{Target: configbundlev1alpha1.TargetSecret, HubSource: &configbundlev1alpha1.HubSource{
		Namespace: "team", Name: "pull", Revision: 1, Hash: strings.Repeat("0", 64)}}
}
