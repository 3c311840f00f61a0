package controlplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"configbundle.dev/hub/internal/testing/controlplane"
)

// TestShared starts a fleet of two slim control planes on one etcd, adds a third, and checks
// that each is a kube-apiserver of its own: its own data, CRDs and audit log, paused alone.
func TestShared(t *testing.T) {
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	g := gomega.NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	fleet, err := controlplane.StartShared(ctx, controlplane.SharedOptions{
		AuditWrites: true, StartTimeout: startTimeout, CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()},
	})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { g.Expect(fleet.Stop()).To(gomega.Succeed()) })
	cps, err := fleet.Add(ctx, "one", "two")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	_, err = fleet.Add(ctx, "two")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("duplicate")))
	third, err := fleet.Add(ctx, "three")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cps = append(cps, third...)
	g.Expect(fleet.Planes()).To(gomega.Equal(cps))

	clients := make([]kubernetes.Interface, len(cps))
	for i, cp := range cps {
		clients[i] = kubernetes.NewForConfigOrDie(cp.Config)
		fromFile, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_, err = kubernetes.NewForConfigOrDie(fromFile).CoreV1().Namespaces().Get(t.Context(), "kube-system", metav1.GetOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred(), cp.Name)
		resources, err := clients[i].Discovery().ServerResourcesForGroupVersion("test.configbundle.dev/v1")
		g.Expect(err).NotTo(gomega.HaveOccurred(), "%s serves the CRD", cp.Name)
		g.Expect(resources.APIResources).To(gomega.ContainElement(gomega.HaveField("Name", "widgets")))
		_, err = clients[i].Discovery().ServerResourcesForGroupVersion("apps/v1")
		g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "%s serves apps/v1: %v", cp.Name, err)
		pid, err := cp.APIServerPID()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(pid).To(gomega.BeNumerically(">", 0))
	}
	g.Expect(fleet.EtcdPID()).To(gomega.BeNumerically(">", 0))

	t.Run("each has its own data and audit log", func(t *testing.T) {
		g := gomega.NewWithT(t)
		_, err := clients[0].CoreV1().ConfigMaps("default").Create(t.Context(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "only-in-one"}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_, err = clients[1].CoreV1().ConfigMaps("default").Get(t.Context(), "only-in-one", metav1.GetOptions{})
		g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "got %v", err)
		writes, err := cps[0].Writes()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(writes).To(gomega.ContainElement(gomega.And(gomega.HaveField("Name", "only-in-one"), gomega.HaveField("Verb", "create"))))
		writes, err = cps[1].Writes()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(writes).NotTo(gomega.ContainElement(gomega.HaveField("Name", "only-in-one")))
	})

	t.Run("pause hangs one alone", func(t *testing.T) {
		g := gomega.NewWithT(t)
		g.Expect(cps[2].Pause()).To(gomega.Succeed())
		g.Expect(getDefault(t, clients[2])).To(gomega.MatchError(context.DeadlineExceeded))
		g.Expect(getDefault(t, clients[0])).To(gomega.Succeed())
		g.Expect(cps[2].Resume()).To(gomega.Succeed())
		g.Eventually(func() error { return getDefault(t, clients[2]) }).
			WithTimeout(recoverTimeout).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
	})

	t.Run("users cannot be added", func(t *testing.T) {
		_, err := cps[0].AddUser("alice", nil)
		gomega.NewWithT(t).Expect(errors.Is(err, errors.ErrUnsupported)).To(gomega.BeTrue(), "got %v", err)
	})
}
