package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// settled returns nil once a bundle's ConfigMap publishes its message and its status records
// that ConfigMap, with no heal counted.
func settled(ctx context.Context, c client.Client, key client.ObjectKey) error {
	b := &configbundlev1alpha1.ConfigBundle{}
	if err := c.Get(ctx, key, b); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cm); err != nil {
		return err
	}
	switch ref := b.Status.ConfigMapRef; {
	case cm.Data[configbundlev1alpha1.MessageKey] != b.Spec.Message:
		return fmt.Errorf("%s: ConfigMap says %q, the bundle %q", key, cm.Data[configbundlev1alpha1.MessageKey], b.Spec.Message)
	case ref == nil || ref.UID != cm.UID || ref.ResourceVersion != cm.ResourceVersion:
		return fmt.Errorf("%s: status.configMapRef %v does not record ConfigMap %s/%s", key, ref, cm.UID, cm.ResourceVersion)
	case b.Status.Heals != 0:
		return fmt.Errorf("%s: %d heals counted for the bundle's own edits", key, b.Status.Heals)
	}
	return nil
}

// TestFaultHubKilledDuringStorm: the hub is killed (SIGKILL) in the middle of a storm of bundle
// edits and deletions, and the storm goes on while it is down and after it is back. Once it is
// over, every bundle left publishes its last message with its status recording it, no edit is
// counted as a heal, and no deleted bundle got a new ConfigMap.
func TestFaultHubKilledDuringStorm(t *testing.T) {
	const (
		bundles = 20
		rounds  = 12 // of edits to every bundle; the hub is killed after killAt and started after startAt
		killAt  = 3
		startAt = 6
	)
	g, ctx, c := NewWithT(t), context.Background(), fl.Member("m1").Client
	joined(t, "m1")
	keys := make([]client.ObjectKey, bundles)
	for i := range keys {
		keys[i] = client.ObjectKeyFromObject(createBundle(g, "m1", "storm", fmt.Sprintf("b%02d", i), "round 0"))
	}
	// Every other bundle is deleted during the storm, one per round; its ConfigMap must keep the
	// uid it had, or be gone.
	uids := map[client.ObjectKey]types.UID{}
	for _, key := range keys {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, key, cm)).To(Succeed())
		uids[key] = cm.UID
	}
	deleted := map[client.ObjectKey]bool{}
	killed := false
	t.Cleanup(func() {
		if killed {
			_ = startHub()
		}
	})
	var restarted time.Time
	for round := 1; round <= rounds; round++ {
		switch round {
		case killAt:
			fl.StopHub(fleet.HubName, syscall.SIGKILL)
			killed = true
		case startAt:
			g.Expect(startHub()).To(Succeed())
			killed, restarted = false, time.Now()
		}
		for i, key := range keys {
			if deleted[key] {
				continue
			}
			if i%2 == 1 && i/2 == round-1 {
				g.Expect(c.Delete(ctx, &configbundlev1alpha1.ConfigBundle{ObjectMeta: objectMeta(key)})).To(Succeed())
				deleted[key] = true
				continue
			}
			g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
				b := &configbundlev1alpha1.ConfigBundle{}
				if err := c.Get(ctx, key, b); err != nil {
					return err
				}
				b.Spec.Message = fmt.Sprintf("round %d", round)
				b.Labels = map[string]string{"round": fmt.Sprint(round)}
				return c.Update(ctx, b)
			})).To(Succeed())
		}
	}
	over := time.Now()

	for _, key := range keys {
		if deleted[key] {
			continue
		}
		g.Eventually(func() error { return settled(ctx, c, key) }).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())
	}
	t.Logf("hub killed in a storm of %d rounds of edits to %d bundles and %d deletions: every bundle settled %v after the storm, %v after the hub's restart",
		rounds, bundles, len(deleted), time.Since(over).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))
	for key := range deleted {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, key, cm)
		if apierrors.IsNotFound(err) {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cm.UID).To(Equal(uids[key]), "%s: a deleted bundle got a new ConfigMap", key)
	}
}

func objectMeta(key client.ObjectKey) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
}

// TestFaultHubKilledBetweenItsWriteAndItsStatus: the hub wrote a bundle's ConfigMap and was
// killed before the status write that records it; the bundle changed again meanwhile. The
// restarted hub, which remembers none of its writes, follows the change without counting its
// own write as drift: the ConfigMap's managedFields, which the cache strips, are read from the
// API server to tell.
func TestFaultHubKilledBetweenItsWriteAndItsStatus(t *testing.T) {
	g, ctx, c := NewWithT(t), context.Background(), fl.Member("m1").Client
	joined(t, "m1")
	key := client.ObjectKeyFromObject(createBundle(g, "m1", "killed-between", "web", "v1"))
	g.Eventually(func() error { return settled(ctx, c, key) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

	fl.StopHub(fleet.HubName, syscall.SIGKILL)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = startHub()
		}
	})
	setMessage := func(message string) {
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b := &configbundlev1alpha1.ConfigBundle{}
			if err := c.Get(ctx, key, b); err != nil {
				return err
			}
			b.Spec.Message = message
			return c.Update(ctx, b)
		})).To(Succeed())
	}
	// What the hub did before it died: the bundle said v2, the hub wrote v2 into its ConfigMap,
	// as its own field manager; the status still records the v1 ConfigMap.
	setMessage("v2")
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, key, cm)).To(Succeed())
	cm.Data[configbundlev1alpha1.MessageKey] = "v2"
	g.Expect(c.Update(ctx, cm, client.FieldOwner(hubv1alpha1.FieldOwner))).To(Succeed())
	setMessage("v3") // and the bundle changed again while no hub ran

	g.Expect(startHub()).To(Succeed())
	restarted = true
	g.Eventually(func() error { return settled(ctx, c, key) }).WithTimeout(joinTimeout).WithPolling(interval).Should(Succeed())
	g.Expect(fleet.Message(ctx, c, key)).To(Equal("v3"))
}
