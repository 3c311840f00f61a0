//go:build cluster

package cluster_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"configbundle.dev/hub/internal/testing/cluster"
)

// TestCluster: a pod of an imported image runs on the node, as non-root with the
// RuntimeDefault seccomp profile, and Stop leaves nothing behind.
func TestCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c, err := cluster.Start(ctx, cluster.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	cs, err := kubernetes.NewForConfig(c.Config)
	g.Expect(err).NotTo(HaveOccurred())

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65535),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "pause", Image: cluster.PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
	_, err = cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		got, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "%+v", got.Status)
		g.Expect(got.Status.PodIP).To(HavePrefix("10.244.0."))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

	dir := c.Dir()
	stopped = true
	g.Expect(c.Stop()).To(Succeed())
	g.Expect(dir).NotTo(BeADirectory())
	_, err = os.Stat("/sys/class/net/" + cluster.Bridge)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the bridge is deleted")
	_ = context.Background
}
