package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// installPrerequisites applies, for real, what the other objects of objs need to exist before
// the API server can judge them: their Namespaces and CRDs. It waits for the CRDs to be
// established.
func installPrerequisites(t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	var crds []string
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace":
			g.Expect(apply(ctx, c, u)).To(Succeed(), id(u))
		case "CustomResourceDefinition":
			g.Expect(apply(ctx, c, u)).To(Succeed(), id(u))
			crds = append(crds, u.GetName())
		}
	}
	for _, name := range crds {
		g.Eventually(func(g Gomega) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(c.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed())
			g.Expect(crd.Status.Conditions).To(ContainElement(And(
				HaveField("Type", apiextensionsv1.Established),
				HaveField("Status", apiextensionsv1.ConditionTrue),
			)))
		}).WithTimeout(establishTimeout).WithPolling(interval).Should(Succeed(), "CRD %s established", name)
	}
}

// TestServerAcceptsManifests server-side applies every object of config/default (the bind policy
// and the tenancy roles included), config/member and config/samples (with the hub's samples that
// kustomization.yaml does not list: the FleetBundles and the ClusterSet global) as a dry run against a real API server, after their CRDs and Namespaces are
// installed: schema, validation and admission (Pod Security included) have their say, and
// nothing else is written.
func TestServerAcceptsManifests(t *testing.T) {
	cp := controlPlane(t, "dry")
	c := adminClient(t, cp)
	defaults, members, samples := render(t, "default"), render(t, "member"), render(t, "samples")
	installPrerequisites(t, c, slices.Concat(defaults, members))

	for dir, objs := range map[string][]*unstructured.Unstructured{"default": defaults, "member": members} {
		t.Run(dir, func(t *testing.T) {
			for _, u := range objs {
				NewWithT(t).Expect(apply(t.Context(), c, u, client.DryRunAll)).To(Succeed(), id(u))
			}
		})
	}
	t.Run("samples", func(t *testing.T) {
		g := NewWithT(t)
		var hubSamples []string
		for _, pattern := range []string{"fleetbundle_*.yaml", "clusterset_*.yaml"} {
			files, err := filepath.Glob(filepath.Join(configDir, "samples", pattern))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(files).NotTo(BeEmpty(), pattern)
			hubSamples = append(hubSamples, files...)
		}
		kinds := map[string]bool{}
		for _, file := range hubSamples { // the hub's samples, not in kustomization.yaml
			raw, err := os.ReadFile(file)
			g.Expect(err).NotTo(HaveOccurred())
			samples = append(samples, decodeYAML(t, string(raw))...)
		}
		for _, u := range samples {
			u = u.DeepCopy()
			kinds[u.GetKind()] = true
			namespaced, err := c.IsObjectNamespaced(u)
			g.Expect(err).NotTo(HaveOccurred(), id(u))
			if namespaced && u.GetNamespace() == "" {
				u.SetNamespace(metav1.NamespaceDefault)
			}
			g.Expect(apply(t.Context(), c, u, client.DryRunAll)).To(Succeed(), id(u))
		}
		g.Expect(kinds).To(And(HaveKey("ConfigBundle"), HaveKey("FleetBundle"), HaveKey("ClusterSet"), HaveKey("ClusterSetBinding")))
	})

	// The dry runs above judge the Deployment, but Pod Security judges only pods: a pod made
	// from its template must be admitted in the namespace, which enforces the restricted
	// standard.
	t.Run("hub pod meets the restricted Pod Security Standard", func(t *testing.T) {
		g := NewWithT(t)
		d := convert[appsv1.Deployment](t, find(t, defaults, "Deployment", namespace, hubName))
		ns := &corev1.Namespace{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: namespace}, ns)).To(Succeed())
		g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))

		pod := func(mutate func(*corev1.PodSpec)) *corev1.Pod {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "hub-pod-check", Namespace: namespace, Labels: d.Spec.Template.Labels},
				Spec:       *d.Spec.Template.Spec.DeepCopy(),
			}
			mutate(&p.Spec)
			return p
		}
		g.Expect(c.Create(t.Context(), pod(func(*corev1.PodSpec) {}), client.DryRunAll)).To(Succeed())
		// The control: the same pod allowed to escalate is refused, so the namespace's
		// enforcement is really on.
		err := c.Create(t.Context(), pod(func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		}), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden by Pod Security, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("restricted"))
	})

	// The dry runs are strict: an unknown field is an error, not silently dropped.
	t.Run("control: an unknown field is refused", func(t *testing.T) {
		g := NewWithT(t)
		u := find(t, defaults, "Deployment", namespace, hubName).DeepCopy()
		g.Expect(unstructured.SetNestedField(u.Object, int64(1), "spec", "template", "spec", "replicaz")).To(Succeed())
		g.Expect(apply(t.Context(), c, u, client.DryRunAll)).NotTo(Succeed())
	})
}
