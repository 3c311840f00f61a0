package controlplane_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"configbundle.dev/hub/internal/testing/controlplane"
)

const (
	// startTimeout bounds Start of both control planes; generous for a loaded 2-core machine.
	startTimeout = 4 * time.Minute
	// gcTimeout bounds the garbage collector's deletion of a dependent.
	gcTimeout = time.Minute
	// requestTimeout is the timeout of each request that must fail against a paused apiserver.
	requestTimeout = 2 * time.Second
	// recoverTimeout bounds the return to service after Resume.
	recoverTimeout = 30 * time.Second
	// stopPausedTimeout bounds Stop of a paused control plane (it must resume, not wait for a kill).
	stopPausedTimeout = 15 * time.Second
	// apiServerStartTimeout bounds starting a kube-apiserver again, or a second one.
	apiServerStartTimeout = time.Minute
)

func TestControlPlanes(t *testing.T) {
	if err := controlplane.CheckAssets(); err != nil {
		t.Fatal(err)
	}
	g := gomega.NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()

	var output bytes.Buffer // Start serializes writes; read only after every process has stopped
	began := time.Now()
	cps, err := controlplane.Start(ctx, controlplane.Named(controlplane.Options{
		GarbageCollector: true,
		AuditWrites:      true,
		StartTimeout:     startTimeout,
		Output:           &output,
		CRDs:             []*apiextensionsv1.CustomResourceDefinition{widgetCRD()},
	}, "alpha", "beta")...)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	t.Cleanup(func() { g.Expect(controlplane.StopAll(cps)).To(gomega.Succeed()) })
	t.Logf("started %d control planes with garbage collectors in %s", len(cps), time.Since(began).Round(time.Millisecond))
	g.Expect(cps).To(gomega.HaveLen(2))
	g.Expect(cps[0].Host()).NotTo(gomega.Equal(cps[1].Host()))

	clients := make([]kubernetes.Interface, len(cps))
	for i, cp := range cps {
		g.Expect(cp.Name).To(gomega.Equal([]string{"alpha", "beta"}[i]))
		clients[i] = kubernetes.NewForConfigOrDie(cp.Config)
	}

	t.Run("both answer, also through their kubeconfigs", func(t *testing.T) {
		g := gomega.NewWithT(t)
		for i, cp := range cps {
			_, err := clients[i].CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred(), cp.Name)
			resources, err := clients[i].Discovery().ServerResourcesForGroupVersion("test.configbundle.dev/v1")
			g.Expect(err).NotTo(gomega.HaveOccurred(), "%s serves the CRD", cp.Name)
			g.Expect(resources.APIResources).To(gomega.ContainElement(
				gomega.HaveField("Name", "widgets")), cp.Name)

			fromFile, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			fromBytes, err := clientcmd.RESTConfigFromKubeConfig(cp.Kubeconfig())
			g.Expect(err).NotTo(gomega.HaveOccurred())
			raw, err := clientcmd.Load(cp.Kubeconfig())
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(raw.CurrentContext).To(gomega.Equal(cp.Name))
			g.Expect(raw.Contexts).To(gomega.HaveLen(1))
			for _, cfg := range []*rest.Config{fromFile, fromBytes} {
				_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
				g.Expect(err).NotTo(gomega.HaveOccurred(), cp.Name)
			}
		}
	})

	t.Run("writes are audited, reads are not", func(t *testing.T) {
		g := gomega.NewWithT(t)
		cms := kubernetes.NewForConfigOrDie(rest.CopyConfig(cps[1].Config)).CoreV1().ConfigMaps("default")
		_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_, err = cms.Get(t.Context(), "audited", metav1.GetOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(cms.Delete(t.Context(), "audited", metav1.DeleteOptions{})).To(gomega.Succeed())
		writes, err := cps[1].Writes()
		g.Expect(err).NotTo(gomega.HaveOccurred())
		var ours []string
		for _, w := range writes {
			if w.Resource == "configmaps" && w.Name == "audited" {
				g.Expect(w.Namespace).To(gomega.Equal("default"))
				g.Expect(w.At).NotTo(gomega.BeZero())
				ours = append(ours, fmt.Sprintf("%s %d", w.Verb, w.Code))
			}
		}
		g.Expect(ours).To(gomega.Equal([]string{"create 201", "delete 200"}))
	})

	t.Run("added user is authenticated but not authorized", func(t *testing.T) {
		g := gomega.NewWithT(t)
		cfg, err := cps[0].AddUser("alice", []string{"team-a"})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(gomega.BeTrue(), "want Forbidden, got %v", err)
		g.Expect(err.Error()).To(gomega.ContainSubstring(`"alice"`))
	})

	t.Run("garbage collector deletes dependents of a deleted owner", func(t *testing.T) {
		for i, cp := range cps {
			g := gomega.NewWithT(t)
			cms := clients[i].CoreV1().ConfigMaps("default")
			owner, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred(), cp.Name)
			_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: "owned",
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
				}},
			}}, metav1.CreateOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred(), cp.Name)

			g.Expect(cms.Delete(t.Context(), owner.Name, metav1.DeleteOptions{})).To(gomega.Succeed())
			began := time.Now()
			g.Eventually(func() error {
				_, err := cms.Get(t.Context(), "owned", metav1.GetOptions{})
				return err
			}).WithTimeout(gcTimeout).WithPolling(100*time.Millisecond).
				Should(gomega.Satisfy(apierrors.IsNotFound), "%s: owned ConfigMap not garbage-collected", cp.Name)
			t.Logf("%s: owned ConfigMap collected %s after its owner's deletion", cp.Name, time.Since(began).Round(time.Millisecond))
		}
	})

	t.Run("pause hangs requests until resume", func(t *testing.T) {
		g := gomega.NewWithT(t)
		g.Expect(cps[0].Pause()).To(gomega.Succeed())
		g.Expect(cps[0].Pause()).To(gomega.Succeed(), "pausing twice")
		g.Expect(getDefault(t, clients[0])).To(gomega.MatchError(context.DeadlineExceeded))
		g.Expect(getDefault(t, clients[1])).To(gomega.Succeed(), "the other control plane is unaffected")

		g.Expect(cps[0].Resume()).To(gomega.Succeed())
		g.Eventually(func() error { return getDefault(t, clients[0]) }).
			WithTimeout(recoverTimeout).WithPolling(100 * time.Millisecond).Should(gomega.Succeed())
	})

	t.Run("kill, change behind its back through a second apiserver, start again", func(t *testing.T) {
		g := gomega.NewWithT(t)
		ctx, cancel := context.WithTimeout(t.Context(), apiServerStartTimeout)
		defer cancel()
		cms := clients[0].CoreV1().ConfigMaps("default")
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())

		secondCfg, err := cps[0].SecondAPIServer(ctx)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(secondCfg.Host).NotTo(gomega.Equal(cps[0].Config.Host))
		again, err := cps[0].SecondAPIServer(ctx)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(again.Host).To(gomega.Equal(secondCfg.Host), "one second apiserver per control plane")
		behind := kubernetes.NewForConfigOrDie(secondCfg).CoreV1().ConfigMaps("default")
		_, err = behind.Get(ctx, "before", metav1.GetOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred(), "the second apiserver serves the same etcd")

		g.Expect(cps[0].KillAPIServer()).To(gomega.Succeed())
		g.Expect(cps[0].KillAPIServer()).To(gomega.Succeed(), "killing twice")
		_, err = cms.Get(ctx, "before", metav1.GetOptions{})
		g.Expect(err).To(gomega.HaveOccurred(), "the first apiserver is gone")
		g.Expect(cps[0].Pause()).NotTo(gomega.Succeed(), "a killed apiserver cannot be paused")
		g.Expect(getDefault(t, clients[1])).To(gomega.Succeed(), "the other control plane is unaffected")

		// Behind the back of every client of the first apiserver.
		_, err = behind.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "behind"}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(behind.Delete(ctx, "before", metav1.DeleteOptions{})).To(gomega.Succeed())

		host := cps[0].Host()
		began := time.Now()
		g.Expect(cps[0].StartAPIServer(ctx)).To(gomega.Succeed())
		t.Logf("kube-apiserver started again in %s", time.Since(began).Round(time.Millisecond))
		g.Expect(cps[0].StartAPIServer(ctx)).To(gomega.Succeed(), "starting a running apiserver")
		g.Expect(cps[0].Host()).To(gomega.Equal(host))

		// The same client, the kubeconfig file and an added user all work again.
		fromFile, err := clientcmd.BuildConfigFromFlags("", cps[0].KubeconfigPath)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for _, c := range []kubernetes.Interface{clients[0], kubernetes.NewForConfigOrDie(fromFile)} {
			_, err = c.CoreV1().ConfigMaps("default").Get(ctx, "behind", metav1.GetOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			_, err = c.CoreV1().ConfigMaps("default").Get(ctx, "before", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "want NotFound, got %v", err)
		}
		bob, err := cps[0].AddUser("bob", nil)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		_, err = kubernetes.NewForConfigOrDie(bob).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(gomega.BeTrue(), "want Forbidden, got %v", err)

		// Pause and Resume find the new process; a second kill and start work as the first.
		g.Expect(cps[0].Pause()).To(gomega.Succeed())
		g.Expect(getDefault(t, clients[0])).To(gomega.MatchError(context.DeadlineExceeded))
		g.Expect(cps[0].Resume()).To(gomega.Succeed())
		g.Expect(cps[0].KillAPIServer()).To(gomega.Succeed())
		g.Expect(cps[0].StartAPIServer(ctx)).To(gomega.Succeed())
		g.Expect(getDefault(t, clients[0])).To(gomega.Succeed())
	})

	t.Run("stop is idempotent, works when paused and cleans up", func(t *testing.T) {
		g := gomega.NewWithT(t)
		g.Expect(cps[1].Stop()).To(gomega.Succeed())
		g.Expect(cps[1].Stop()).To(gomega.Succeed())
		g.Expect(cps[1].KubeconfigPath).NotTo(gomega.BeAnExistingFile())
		_, err := clients[1].CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
		g.Expect(err).To(gomega.HaveOccurred())
		g.Expect(cps[1].Pause()).NotTo(gomega.Succeed(), "pausing a stopped control plane")

		g.Expect(cps[0].Pause()).To(gomega.Succeed())
		began := time.Now()
		g.Expect(cps[0].Stop()).To(gomega.Succeed())
		g.Expect(time.Since(began)).To(gomega.BeNumerically("<", stopPausedTimeout))
		g.Expect(cps[0].Stop()).To(gomega.Succeed())

		for _, prefix := range []string{"alpha/etcd: ", "beta/kube-apiserver: ", "alpha/kube-controller-manager: ", "alpha/kube-apiserver-2: "} {
			g.Expect(output.String()).To(gomega.ContainSubstring("\n"+prefix), "output has lines of %q", prefix)
		}
	})
}

// getDefault reads the default namespace, waiting at most requestTimeout.
func getDefault(t *testing.T, c kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	_, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	return err
}

// widgetCRD is a minimal namespaced CRD, installed by Start into every control plane.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.test.configbundle.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "test.configbundle.dev",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type:                   "object",
						XPreserveUnknownFields: ptr.To(true),
					},
				},
			}},
		},
	}
}
