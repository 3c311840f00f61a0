package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/config"
)

// kustomizations lists the directories under config/ that hold a kustomization, relative to it.
func kustomizations(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(configDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch d.Name() {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
			rel, err := filepath.Rel(configDir, filepath.Dir(path))
			dirs = append(dirs, filepath.ToSlash(rel))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func TestEveryKustomizationRenders(t *testing.T) {
	g := NewWithT(t)
	dirs := kustomizations(t)
	g.Expect(dirs).To(ContainElements("crd", "crd/bases", "rbac/hub", "rbac/member", "default", "member", "samples"))
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(filepath.Join(configDir, dir, "kustomization.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			var k struct{ APIVersion, Kind string }
			g.Expect(yaml.Unmarshal(raw, &k)).To(Succeed())
			g.Expect(k.APIVersion).To(Equal("kustomize.config.k8s.io/v1beta1"))
			g.Expect(k.Kind).To(Equal("Kustomization"))

			objs := render(t, dir)
			g.Expect(objs).NotTo(BeEmpty())
			for _, u := range objs {
				g.Expect(u.GetAPIVersion()).NotTo(BeEmpty(), id(u))
				g.Expect(u.GetKind()).NotTo(BeEmpty(), id(u))
				g.Expect(u.GetName()).NotTo(BeEmpty(), id(u))
			}
		})
	}
}

// rules flattens RBAC rules into "group/resource[/name]:verb" strings, so that two rule sets
// compare equal however controller-gen or a person groups them.
func rules(rs []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rs {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, n := range names {
					for _, v := range r.Verbs {
						s := g + "/" + res
						if n != "" {
							s += "/" + n
						}
						out = append(out, s+":"+v)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func expand(prefixes []string, verbs ...string) []string {
	var out []string
	for _, p := range prefixes {
		for _, v := range verbs {
			out = append(out, p+":"+v)
		}
	}
	return out
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s: %v", id(u), err)
	}
	return out
}

func TestDefault(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, "default")
	g.Expect(ids(objs)).To(ConsistOf(
		"Namespace//"+namespace,
		"CustomResourceDefinition//memberclusters.hub.configbundle.dev",
		"CustomResourceDefinition//fleets.hub.configbundle.dev",
		"CustomResourceDefinition//fleetbundles.hub.configbundle.dev",
		"ServiceAccount/"+namespace+"/"+hubName,
		"ClusterRole//"+hubName,
		"ClusterRole//configbundle-hub-metrics-reader",
		"ClusterRoleBinding//"+hubName,
		"Role/"+namespace+"/"+hubName,
		"RoleBinding/"+namespace+"/"+hubName,
		"Service/"+namespace+"/configbundle-hub-metrics",
		"Deployment/"+namespace+"/"+hubName,
	))
	for _, u := range objs {
		g.Expect(u.GetLabels()).To(HaveKeyWithValue(nameLabel, hubName), id(u))
	}

	t.Run("CRDs are the embedded hub CRDs", func(t *testing.T) {
		g := NewWithT(t)
		hubCRDs, err := config.HubCRDs()
		g.Expect(err).NotTo(HaveOccurred())
		for _, crd := range hubCRDs {
			rendered := convert[apiextensionsv1.CustomResourceDefinition](t, find(t, objs, "CustomResourceDefinition", "", crd.Name))
			g.Expect(rendered.Spec).To(Equal(crd.Spec), crd.Name)
		}
	})

	t.Run("RBAC", func(t *testing.T) {
		g := NewWithT(t)
		// Cluster-wide: the health reports, FleetBundles (read, finalizer, status), their
		// revisions and their Events (a cluster-scoped MemberCluster's Events go to the namespace default), the
		// metrics endpoint's reviews only; none
		// of the member-side rules (ConfigMaps, ConfigBundles, CRDs, namespaces) may leak in from
		// the packages the hub imports.
		cr := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", hubName))
		g.Expect(rules(cr.Rules)).To(ConsistOf(slices.Concat(
			expand([]string{"hub.configbundle.dev/memberclusters", "hub.configbundle.dev/fleets"}, "get", "list", "watch", "create", "delete"),
			expand([]string{"hub.configbundle.dev/memberclusters/status", "hub.configbundle.dev/fleets/status", "hub.configbundle.dev/fleetbundles/status"}, "get", "update", "patch"),
			expand([]string{"hub.configbundle.dev/fleetbundles"}, "get", "list", "watch", "update"),
			expand([]string{"hub.configbundle.dev/fleetbundles/finalizers"}, "update"),
			// A FleetBundle's revisions, ControllerRevisions in its namespace.
			expand([]string{"apps/controllerrevisions"}, "get", "list", "watch", "create", "delete"),
			expand([]string{"events.k8s.io/events"}, "create", "patch"),
			// The metrics endpoint's authentication and authorization of scrapers.
			expand([]string{"authentication.k8s.io/tokenreviews", "authorization.k8s.io/subjectaccessreviews"}, "create"),
		)))
		// Scrapers are bound to this one: get on /metrics, nothing else.
		reader := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "configbundle-hub-metrics-reader"))
		g.Expect(reader.Rules).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))
		// In its namespace: the members' Secrets read-only, and leader election.
		role := convert[rbacv1.Role](t, find(t, objs, "Role", namespace, hubName))
		g.Expect(rules(role.Rules)).To(ConsistOf(slices.Concat(
			expand([]string{"/secrets"}, "get", "list", "watch"),
			expand([]string{"coordination.k8s.io/leases"}, "get", "list", "watch", "create", "update", "patch"),
			expand([]string{"/events", "events.k8s.io/events"}, "create", "patch"),
		)))

		subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: hubName, Namespace: namespace}
		crb := convert[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "", hubName))
		g.Expect(crb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: hubName}))
		g.Expect(crb.Subjects).To(ConsistOf(subject))
		rb := convert[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", namespace, hubName))
		g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: hubName}))
		g.Expect(rb.Subjects).To(ConsistOf(subject))
	})

	t.Run("Deployment", func(t *testing.T) {
		g := NewWithT(t)
		d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", namespace, hubName))
		g.Expect(d.Spec.Replicas).To(HaveValue(BeNumerically(">=", 1)))
		g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{nameLabel: hubName}))
		g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(nameLabel, hubName))
		pod := d.Spec.Template.Spec
		g.Expect(pod.ServiceAccountName).To(Equal(hubName))
		g.Expect(pod.SecurityContext).NotTo(BeNil())
		g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		g.Expect(pod.SecurityContext.SeccompProfile).To(HaveValue(Equal(corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault})))
		g.Expect(pod.Containers).To(HaveLen(1))

		c := pod.Containers[0]
		g.Expect(c.Image).To(Equal("ghcr.io/configbundle/hub:dev"))
		g.Expect(c.Command).To(BeEmpty(), "the image's entrypoint is the hub")
		g.Expect(c.Args).To(ContainElements("--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"))
		g.Expect(c.Args).To(ContainElement("--secret-namespace=$(POD_NAMESPACE)"))
		g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"},
		}}))

		port := func(p intstr.IntOrString) int32 {
			if p.Type == intstr.Int {
				return p.IntVal
			}
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					return cp.ContainerPort
				}
			}
			t.Fatalf("container %s has no port named %q", c.Name, p.StrVal)
			return 0
		}
		g.Expect(c.LivenessProbe).NotTo(BeNil())
		g.Expect(c.LivenessProbe.HTTPGet).NotTo(BeNil())
		g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		g.Expect(port(c.LivenessProbe.HTTPGet.Port)).To(BeEquivalentTo(8081))
		g.Expect(c.ReadinessProbe).NotTo(BeNil())
		g.Expect(c.ReadinessProbe.HTTPGet).NotTo(BeNil())
		g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		g.Expect(port(c.ReadinessProbe.HTTPGet.Port)).To(BeEquivalentTo(8081))

		g.Expect(c.Resources.Requests.Cpu().String()).To(Equal("100m"))
		g.Expect(c.Resources.Requests.Memory().String()).To(Equal("128Mi"))
		g.Expect(c.Resources.Limits.Memory().String()).To(Equal("512Mi"))

		sc := c.SecurityContext
		g.Expect(sc).NotTo(BeNil())
		g.Expect(sc.RunAsNonRoot).To(HaveValue(BeTrue()))
		g.Expect(sc.RunAsUser).To(HaveValue(BeEquivalentTo(65532)))
		g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		g.Expect(sc.Privileged).To(Or(BeNil(), HaveValue(BeFalse())))
		g.Expect(sc.Capabilities).NotTo(BeNil())
		g.Expect(sc.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
		g.Expect(sc.Capabilities.Add).To(BeEmpty())
		g.Expect(sc.SeccompProfile).To(HaveValue(Equal(corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault})))

		svc := convert[corev1.Service](t, find(t, objs, "Service", namespace, "configbundle-hub-metrics"))
		g.Expect(svc.Spec.Selector).To(Equal(map[string]string{nameLabel: hubName}))
		g.Expect(svc.Spec.Ports).To(HaveLen(1))
		g.Expect(svc.Spec.Ports[0].Name).To(Equal("https"))
		g.Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(8443))
		g.Expect(port(svc.Spec.Ports[0].TargetPort)).To(BeEquivalentTo(8443))
	})
}

// TestDefaultOverlay checks what the base promises an overlay: another namespace moves the Role,
// the bindings' subjects and the hub's Secret namespace along, and `images:` replaces the image.
func TestDefaultOverlay(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(configDir, "default"))
	g.Expect(err).NotTo(HaveOccurred())
	overlay := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: hub-prod\n" +
		"resources:\n- " + filepath.ToSlash(base) + "\n" +
		"images:\n- name: ghcr.io/configbundle/hub\n  newName: registry.example.com/hub\n  newTag: v1.2.3\n"
	g.Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600)).To(Succeed())

	objs := render(t, dir)
	find(t, objs, "Namespace", "", "hub-prod")
	find(t, objs, "Role", "hub-prod", hubName)
	find(t, objs, "ServiceAccount", "hub-prod", hubName)
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: hubName, Namespace: "hub-prod"}
	g.Expect(convert[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", "hub-prod", hubName)).Subjects).To(ConsistOf(subject))
	g.Expect(convert[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "", hubName)).Subjects).To(ConsistOf(subject))
	d := convert[appsv1.Deployment](t, find(t, objs, "Deployment", "hub-prod", hubName))
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example.com/hub:v1.2.3"))
}

func TestMember(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, "member")
	g.Expect(ids(objs)).To(ConsistOf(
		"Namespace//"+namespace,
		"CustomResourceDefinition//configbundles.configbundle.dev",
		"ServiceAccount/"+namespace+"/"+hubName,
		"ClusterRole//configbundle-member",
		"ClusterRoleBinding//configbundle-member",
	))

	// The same rules `hub register` grants, from the same generated file.
	want, err := config.MemberClusterRole()
	g.Expect(err).NotTo(HaveOccurred())
	cr := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "configbundle-member"))
	g.Expect(cr.Rules).To(Equal(want.Rules))

	crb := convert[rbacv1.ClusterRoleBinding](t, find(t, objs, "ClusterRoleBinding", "", "configbundle-member"))
	g.Expect(crb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "configbundle-member"}))
	g.Expect(crb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: hubName, Namespace: namespace}))

	memberCRDs, err := config.MemberCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(memberCRDs).To(HaveLen(1))
	rendered := convert[apiextensionsv1.CustomResourceDefinition](t, find(t, objs, "CustomResourceDefinition", "", memberCRDs[0].Name))
	g.Expect(rendered.Spec).To(Equal(memberCRDs[0].Spec))
}

func TestSamples(t *testing.T) {
	g := NewWithT(t)
	objs := render(t, "samples")
	g.Expect(objs).To(HaveLen(4))
	var mutable, immutable, labelled, data int
	for _, u := range objs {
		g.Expect(u.GetAPIVersion()).To(Equal(configbundlev1alpha1.GroupVersion.String()))
		g.Expect(u.GetKind()).To(Equal("ConfigBundle"))
		b := convert[configbundlev1alpha1.ConfigBundle](t, u)
		g.Expect(b.Spec.Message).NotTo(BeEmpty(), b.Name)
		if b.Spec.Immutable {
			immutable++
		} else {
			mutable++
		}
		if len(b.Labels) > 0 && len(b.Annotations) > 0 {
			labelled++
		}
		if len(b.Spec.Data) > 0 {
			data++
		}
	}
	g.Expect([]int{mutable, immutable, labelled, data}).To(HaveEach(BeNumerically(">=", 1)), "mutable, immutable, labelled and annotated, with data")
}
