package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
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
	objs := asServed(render(t, "default"))
	g.Expect(ids(objs)).To(ConsistOf(
		"Namespace//"+namespace,
		"CustomResourceDefinition//memberclusters.hub.configbundle.dev",
		"CustomResourceDefinition//fleets.hub.configbundle.dev",
		"CustomResourceDefinition//fleetbundles.hub.configbundle.dev",
		"CustomResourceDefinition//clustersets.hub.configbundle.dev",
		"CustomResourceDefinition//clustersetbindings.hub.configbundle.dev",
		"ServiceAccount/"+namespace+"/"+hubName,
		"ClusterRole//"+hubName,
		"ClusterRole//configbundle-hub-metrics-reader",
		"ClusterRole//"+hubv1alpha1.FleetBundleEditorRole,
		"ClusterRole//"+hubv1alpha1.ClusterSetAdminRole,
		"ClusterRole//"+hubv1alpha1.FleetReaderRole,
		"ClusterRoleBinding//"+hubv1alpha1.FleetReaderRole,
		"ValidatingAdmissionPolicy//"+hubv1alpha1.ClusterSetBindPolicyName,
		"ValidatingAdmissionPolicyBinding//"+hubv1alpha1.ClusterSetBindPolicyName,
		"ClusterRole//"+hubv1alpha1.RolloutApproverRole,
		"ValidatingAdmissionPolicy//"+hubv1alpha1.ApprovalPolicyName,
		"ValidatingAdmissionPolicyBinding//"+hubv1alpha1.ApprovalPolicyName,
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
		// metrics endpoint's reviews, and ConfigMaps read as sources only; none of the
		// member-side rules (writes of ConfigMaps, ConfigBundles, CRDs, namespaces) may leak in
		// from the packages the hub imports.
		cr := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", hubName))
		g.Expect(rules(cr.Rules)).To(ConsistOf(slices.Concat(
			expand([]string{"hub.configbundle.dev/memberclusters", "hub.configbundle.dev/fleets"}, "get", "list", "watch", "create", "delete"),
			expand([]string{"hub.configbundle.dev/memberclusters/status", "hub.configbundle.dev/fleets/status", "hub.configbundle.dev/fleetbundles/status",
				"hub.configbundle.dev/clustersets/status", "hub.configbundle.dev/clustersetbindings/status"}, "get", "update", "patch"),
			// The tenancy model: placement reads the sets and their bindings, and never binds.
			expand([]string{"hub.configbundle.dev/clustersets", "hub.configbundle.dev/clustersetbindings"}, "get", "list", "watch"),
			expand([]string{"hub.configbundle.dev/fleetbundles"}, "get", "list", "watch", "update", "patch"),
			expand([]string{"hub.configbundle.dev/fleetbundles/finalizers"}, "update"),
			// A FleetBundle's revisions, ControllerRevisions in its namespace.
			expand([]string{"apps/controllerrevisions"}, "get", "list", "watch", "create", "delete"),
			// The sources of FleetBundles (spec.dataFrom), read only: the hub caches those labelled
			// hub.configbundle.dev/source alone, which RBAC cannot say.
			expand([]string{"/configmaps"}, "get", "list", "watch"),
			// Source Secrets, read the same way, and the hub's snapshots of them, created (the
			// garbage collector deletes them with their ControllerRevision).
			expand([]string{"/secrets"}, "get", "list", "watch", "create"),
			expand([]string{"events.k8s.io/events"}, "create", "patch"),
			// The metrics endpoint's authentication and authorization of scrapers.
			expand([]string{"authentication.k8s.io/tokenreviews", "authorization.k8s.io/subjectaccessreviews"}, "create"),
		)))
		// Scrapers are bound to this one: get on /metrics, nothing else.
		reader := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", "configbundle-hub-metrics-reader"))
		g.Expect(reader.Rules).To(Equal([]rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}))
		// In its namespace: the members' Secrets, read and updated with renewed tokens (never
		// created or deleted), and leader election.
		role := convert[rbacv1.Role](t, find(t, objs, "Role", namespace, hubName))
		g.Expect(rules(role.Rules)).To(ConsistOf(slices.Concat(
			expand([]string{"/secrets"}, "get", "list", "watch", "update"),
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

	t.Run("tenancy: the roles and the bind policy", func(t *testing.T) { testTenancyObjects(t, objs) })

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

// testTenancyObjects checks the objects of the tenancy model among objs (config/default or the
// chart): the editor's role, aggregated to edit and admin, manages FleetBundles and
// ClusterSetBindings but may not bind a set; the set administrator's may; the
// ValidatingAdmissionPolicy checks clustersets/bind of every ClusterSetBinding created or updated,
// and is what config.ClusterSetBindPolicy embeds (what the test fixture installs).
func testTenancyObjects(t *testing.T, objs []*unstructured.Unstructured) {
	g := NewWithT(t)
	hub := func(res ...string) []string {
		out := make([]string, 0, len(res))
		for _, r := range res {
			out = append(out, hubv1alpha1.GroupVersion.Group+"/"+r)
		}
		return out
	}
	editor := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", hubv1alpha1.FleetBundleEditorRole))
	g.Expect(editor.Labels).To(And(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-edit", "true"),
		HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-admin", "true")))
	g.Expect(rules(editor.Rules)).To(ConsistOf(slices.Concat(
		expand(hub("fleetbundles", "clustersetbindings"), "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"),
		expand(hub("fleetbundles/status", "clustersetbindings/status"), "get", "list", "watch"),
		expand([]string{"apps/controllerrevisions"}, "get", "list", "watch"),
	)))
	g.Expect(rules(editor.Rules)).NotTo(ContainElement(HavePrefix(hubv1alpha1.GroupVersion.Group+"/"+hubv1alpha1.ClusterSetBindPermission)),
		"a tenant binds only the sets it is given")
	g.Expect(rules(editor.Rules)).NotTo(ContainElement(HavePrefix(hubv1alpha1.GroupVersion.Group+"/memberclusters")),
		"a tenant may not relabel members")

	admin := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", hubv1alpha1.ClusterSetAdminRole))
	g.Expect(admin.Labels).NotTo(HaveKey(HavePrefix("rbac.authorization.k8s.io/aggregate-to-")), "not aggregated to any namespace role")
	g.Expect(rules(admin.Rules)).To(ConsistOf(slices.Concat(
		expand(hub("clustersets", "clustersetbindings"), "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"),
		expand(hub(hubv1alpha1.ClusterSetBindPermission), hubv1alpha1.ClusterSetBindVerb),
		expand(hub("clustersets/status", "clustersetbindings/status", "fleets", "fleets/status", "memberclusters/status"), "get", "list", "watch"),
		expand(hub("memberclusters"), "get", "list", "watch", "update", "patch"),
	)))

	wantPolicy, wantBinding, err := config.ClusterSetBindPolicy()
	g.Expect(err).NotTo(HaveOccurred())
	policy := convert[admissionregistrationv1.ValidatingAdmissionPolicy](t, find(t, objs, "ValidatingAdmissionPolicy", "", hubv1alpha1.ClusterSetBindPolicyName))
	g.Expect(policy.Spec).To(Equal(wantPolicy.Spec), "config/default's policy is the one embedded")
	g.Expect(policy.Spec.FailurePolicy).To(HaveValue(Equal(admissionregistrationv1.Fail)))
	g.Expect(policy.Spec.MatchConstraints.ResourceRules).To(ConsistOf(HaveField("RuleWithOperations", And(
		HaveField("Operations", ConsistOf(admissionregistrationv1.Create, admissionregistrationv1.Update)),
		HaveField("Rule.APIGroups", ConsistOf(hubv1alpha1.GroupVersion.Group)),
		HaveField("Rule.Resources", ConsistOf("clustersetbindings"))))))
	g.Expect(policy.Spec.Validations).To(ConsistOf(And(
		HaveField("Expression", And(ContainSubstring("resource('clustersets')"), ContainSubstring("subresource('"+hubv1alpha1.ClusterSetBindSubresource+"')"),
			ContainSubstring("name(object.spec.clusterSet)"), ContainSubstring("check('"+hubv1alpha1.ClusterSetBindVerb+"')"))),
		HaveField("MessageExpression", ContainSubstring(hubv1alpha1.ClusterSetBindPermission)))))
	binding := convert[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, find(t, objs, "ValidatingAdmissionPolicyBinding", "", hubv1alpha1.ClusterSetBindPolicyName))
	g.Expect(binding.Spec).To(Equal(wantBinding.Spec))
	g.Expect(binding.Spec.PolicyName).To(Equal(hubv1alpha1.ClusterSetBindPolicyName))
	g.Expect(binding.Spec.ValidationActions).To(ConsistOf(admissionregistrationv1.Deny))
	testApprovalObjects(t, objs)
}

// testApprovalObjects checks the objects of rollout approvals among objs (config/default or the
// chart): the approver's role may approve FleetBundles (the verb approve), the editor's may not;
// the ValidatingAdmissionPolicy checks every FleetBundle created or updated, and is what
// config.ApprovalPolicy embeds (what the test fixture installs).
func testApprovalObjects(t *testing.T, objs []*unstructured.Unstructured) {
	g := NewWithT(t)
	fleetBundles := hubv1alpha1.GroupVersion.Group + "/fleetbundles"
	approver := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", hubv1alpha1.RolloutApproverRole))
	g.Expect(approver.Labels).NotTo(HaveKey(HavePrefix("rbac.authorization.k8s.io/aggregate-to-")), "editing does not let one approve")
	g.Expect(rules(approver.Rules)).To(ConsistOf(expand([]string{fleetBundles}, "get", "list", "watch", "update", "patch", hubv1alpha1.ApproveVerb)))
	editor := convert[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", hubv1alpha1.FleetBundleEditorRole))
	g.Expect(rules(editor.Rules)).NotTo(ContainElement(fleetBundles+":"+hubv1alpha1.ApproveVerb), "an editor cannot approve")

	wantPolicy, wantBinding, err := config.ApprovalPolicy()
	g.Expect(err).NotTo(HaveOccurred())
	policy := convert[admissionregistrationv1.ValidatingAdmissionPolicy](t, find(t, objs, "ValidatingAdmissionPolicy", "", hubv1alpha1.ApprovalPolicyName))
	g.Expect(policy.Spec).To(Equal(wantPolicy.Spec), "the shipped approval policy is the one embedded")
	g.Expect(policy.Spec.FailurePolicy).To(HaveValue(Equal(admissionregistrationv1.Fail)))
	g.Expect(policy.Spec.MatchConstraints.ResourceRules).To(ConsistOf(HaveField("RuleWithOperations", And(
		HaveField("Operations", ConsistOf(admissionregistrationv1.Create, admissionregistrationv1.Update)),
		HaveField("Rule.APIGroups", ConsistOf(hubv1alpha1.GroupVersion.Group)),
		HaveField("Rule.Resources", ConsistOf("fleetbundles"))))))
	g.Expect(policy.Spec.Validations).To(ContainElements(
		HaveField("Expression", ContainSubstring("request.userInfo.username")),
		HaveField("Expression", ContainSubstring("variables.mayApprove"))))
	g.Expect(policy.Spec.Variables).To(ContainElement(HaveField("Expression",
		And(ContainSubstring("resource('fleetbundles')"), ContainSubstring("check('"+hubv1alpha1.ApproveVerb+"')")))))
	binding := convert[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, find(t, objs, "ValidatingAdmissionPolicyBinding", "", hubv1alpha1.ApprovalPolicyName))
	g.Expect(binding.Spec).To(Equal(wantBinding.Spec))
	g.Expect(binding.Spec.PolicyName).To(Equal(hubv1alpha1.ApprovalPolicyName))
	g.Expect(binding.Spec.ValidationActions).To(ConsistOf(admissionregistrationv1.Deny))
}

// TestClusterSetSample: config/samples/clusterset_global.yaml is the ClusterSet global, selecting
// every member ({}), and its binding into default, as config.SampleClusterSet embeds it (what
// the test fixture and the demo apply).
func TestClusterSetSample(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join(configDir, "samples", "clusterset_global.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	objs := decodeYAML(t, string(raw))
	g.Expect(ids(objs)).To(Equal([]string{"ClusterSet//global", "ClusterSetBinding/default/global"}))
	set := convert[hubv1alpha1.ClusterSet](t, objs[0])
	g.Expect(set.Spec.ClusterSelector).To(Equal(metav1.LabelSelector{}), "{} selects every member")
	binding := convert[hubv1alpha1.ClusterSetBinding](t, objs[1])
	g.Expect(binding.Spec.ClusterSet).To(Equal(set.Name), "named after the set it binds")
	wantSet, wantBinding, err := config.SampleClusterSet()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(set.Spec).To(Equal(wantSet.Spec))
	g.Expect(wantSet.Name).To(Equal(set.Name))
	g.Expect(binding.Spec).To(Equal(wantBinding.Spec))
	g.Expect(client.ObjectKeyFromObject(wantBinding)).To(Equal(client.ObjectKeyFromObject(binding)))
	for _, u := range render(t, "samples") {
		g.Expect(u.GetKind()).To(Equal("ConfigBundle"), "kustomization.yaml lists the members' samples only: %s", id(u))
	}
}
