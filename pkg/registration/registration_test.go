package registration_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/pkg/registration"
)

// baseOptions are Options with only the required fields set.
func baseOptions(name string) registration.Options {
	return registration.Options{
		Name:   name,
		Member: rest.CopyConfig(memberCP.Config),
		Hub:    rest.CopyConfig(hubCP.Config),
	}
}

// unregister is registration.Unregister, for the tests that check its error alone.
func unregister(ctx context.Context, opts registration.Options) error {
	_, err := registration.Unregister(ctx, opts)
	return err
}

// register registers opts and unregisters it when the test ends.
func register(t *testing.T, opts registration.Options) *registration.Result {
	t.Helper()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	began := time.Now()
	res, err := registration.Register(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("registered %q in %s", opts.Name, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		if err := unregister(ctx, opts); err != nil && !errors.Is(err, registration.ErrNotRegistered) {
			t.Errorf("cleaning up: %v", err)
		}
	})
	return res
}

// hubSecret returns the hub Secret namespace/name.
func hubSecret(g Gomega, namespace, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(hubAdmin.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s)).To(Succeed())
	return s
}

// kubeconfigIn returns the kubeconfig stored under key in s, raw and parsed. Failure messages
// never show the kubeconfig or the Secret's data.
func kubeconfigIn(g Gomega, s *corev1.Secret, key string) ([]byte, *clientcmdapi.Config) {
	g.Expect(slices.Sorted(maps.Keys(s.Data))).To(Equal([]string{key}), "the Secret holds exactly the kubeconfig")
	raw := s.Data[key]
	kc, err := clientcmd.Load(raw)
	g.Expect(err).NotTo(HaveOccurred(), "the Secret's kubeconfig parses")
	return raw, kc
}

// tokenOf returns the token of the kubeconfig's only user.
func tokenOf(g Gomega, kc *clientcmdapi.Config) string {
	g.Expect(kc.AuthInfos).To(HaveLen(1))
	for _, u := range kc.AuthInfos {
		g.Expect(u.Token).NotTo(BeEmpty(), "the kubeconfig has a token")
		return u.Token
	}
	return ""
}

// memberClientFor returns a client that uses kubeconfig's credential against the member, through
// memberURL whatever server the kubeconfig names.
func memberClientFor(g Gomega, kubeconfig []byte) client.WithWatch {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	cfg.Host = memberURL
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func memberRole(g Gomega) *rbacv1.ClusterRole {
	role, err := config.MemberClusterRole()
	g.Expect(err).NotTo(HaveOccurred())
	return role
}

// expectManagedByRegister checks the label and the server-side apply field manager of obj.
func expectManagedByRegister(g Gomega, obj client.Object) {
	g.Expect(obj.GetLabels()).To(HaveKeyWithValue(hubv1alpha1.ManagedByLabel, registration.FieldOwner), "%T %s", obj, obj.GetName())
	managers := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range obj.GetManagedFields() {
		managers[mf.Manager] = mf.Operation
	}
	g.Expect(managers).To(HaveKeyWithValue(registration.FieldOwner, metav1.ManagedFieldsOperationApply), "%T %s", obj, obj.GetName())
}

func TestRegisterWritesVerifiedSelfContainedKubeconfig(t *testing.T) {
	g := NewWithT(t)

	// The operator's member credentials name their CA by file; the kubeconfig must embed it.
	member := rest.CopyConfig(memberCP.Config)
	caFile := filepath.Join(t.TempDir(), "member-ca.crt")
	g.Expect(os.WriteFile(caFile, member.CAData, 0o600)).To(Succeed())
	member.CAData, member.CAFile = nil, caFile

	// An address only "the hub" could reach: it does not resolve here, so Register must verify
	// the credential through Member.Host.
	const hubOnlyServer = "https://member.hub-only.invalid:6443"
	opts := baseOptions("member-one")
	opts.Member = member
	opts.Server = hubOnlyServer
	began := time.Now()
	res := register(t, opts)

	g.Expect(res.SecretName).To(Equal("member-one"))
	g.Expect(res.SecretNamespace).To(Equal(hubv1alpha1.DefaultSecretNamespace))
	g.Expect(res.Server).To(Equal(hubOnlyServer))
	g.Expect(res.TokenExpires).To(BeTemporally(">=", began.Add(registration.DefaultTokenDuration).Add(-time.Minute)))
	g.Expect(res.TokenExpires).To(BeTemporally("<=", time.Now().Add(registration.DefaultTokenDuration).Add(time.Minute)))

	secret := hubSecret(g, hubv1alpha1.DefaultSecretNamespace, "member-one")
	g.Expect(secret.Type).To(Equal(corev1.SecretTypeOpaque))
	g.Expect(secret.Labels).To(HaveKeyWithValue(hubv1alpha1.DefaultSecretLabel, "true"))
	expectManagedByRegister(g, secret)
	g.Expect(secret.Annotations).To(HaveKey(registration.TokenExpiresAnnotation))
	expires, err := time.Parse(time.RFC3339, secret.Annotations[registration.TokenExpiresAnnotation])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(expires).To(BeTemporally("==", res.TokenExpires))

	raw, kc := kubeconfigIn(g, secret, hubv1alpha1.DefaultSecretKey)
	g.Expect(kc.CurrentContext).To(Equal("member-one"))
	g.Expect(slices.Collect(maps.Keys(kc.Contexts))).To(Equal([]string{"member-one"}))
	g.Expect(slices.Collect(maps.Keys(kc.Clusters))).To(Equal([]string{"member-one"}))
	g.Expect(slices.Collect(maps.Keys(kc.AuthInfos))).To(Equal([]string{"member-one"}))
	g.Expect(kc.Contexts["member-one"]).To(And(HaveField("Cluster", "member-one"), HaveField("AuthInfo", "member-one")))

	cluster := kc.Clusters["member-one"]
	g.Expect(cluster.Server).To(Equal(hubOnlyServer), "the Server override is what the hub gets")
	g.Expect(cluster.CertificateAuthorityData).To(Equal(memberCP.Config.CAData), "the CA read from Member.CAFile is embedded")
	g.Expect(cluster.CertificateAuthority).To(BeEmpty())
	g.Expect(cluster.InsecureSkipTLSVerify).To(BeFalse())
	g.Expect(cluster.ProxyURL).To(BeEmpty())

	user := kc.AuthInfos["member-one"]
	tokenOf(g, kc)
	g.Expect(user.Exec).To(BeNil(), "no exec plugin")
	g.Expect(user.AuthProvider).To(BeNil(), "no auth-provider")
	g.Expect(user.TokenFile).To(BeEmpty(), "no token file")
	g.Expect(user.ClientCertificate).To(BeEmpty(), "no certificate file")
	g.Expect(user.ClientKey).To(BeEmpty(), "no key file")
	g.Expect(user.ClientCertificateData).To(BeEmpty())
	g.Expect(user.ClientKeyData).To(BeEmpty())
	g.Expect(user.Username + user.Password + user.Impersonate).To(BeEmpty())
	for _, s := range []string{"exec:", "auth-provider", "tokenFile", "client-certificate:", "client-key:", "certificate-authority:"} {
		g.Expect(strings.Contains(string(raw), s)).To(BeFalse(), "the kubeconfig mentions %q", s)
	}

	// The credential works (through the member's real address) and is the ServiceAccount's.
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.Host).To(Equal(hubOnlyServer))
	hubView := memberClientFor(g, raw)
	g.Expect(hubView.Get(t.Context(), client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{})).To(Succeed())

	// What Register applied in the member.
	ns := &corev1.Namespace{}
	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Name: hubv1alpha1.DefaultSecretNamespace}, ns)).To(Succeed())
	expectManagedByRegister(g, ns)
	sa := &corev1.ServiceAccount{}
	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "configbundle-hub-member-one"}, sa)).To(Succeed(),
		"the registration's own ServiceAccount")
	expectManagedByRegister(g, sa)
	g.Expect(sa.Annotations).To(HaveKeyWithValue(registration.RegistrationAnnotation, "member-one"))
	role := &rbacv1.ClusterRole{}
	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Name: registration.RBACName}, role)).To(Succeed())
	expectManagedByRegister(g, role)
	g.Expect(role.Rules).To(Equal(memberRole(g).Rules), "exactly the rules of config.MemberClusterRole()")
	binding := &rbacv1.ClusterRoleBinding{}
	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Name: "configbundle-hub-member-member-one"}, binding)).To(Succeed(),
		"the registration's own ClusterRoleBinding")
	expectManagedByRegister(g, binding)
	g.Expect(binding.Annotations).To(HaveKeyWithValue(registration.RegistrationAnnotation, "member-one"))
	g.Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: registration.RBACName}))
	g.Expect(binding.Subjects).To(Equal([]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: hubv1alpha1.DefaultSecretNamespace, Name: sa.Name}}))

	// The token is bound to the registration's one token Secret: no data, not a legacy
	// service-account-token Secret.
	tokenSecrets := tokenSecretsOf(g, hubv1alpha1.DefaultSecretNamespace, "member-one")
	g.Expect(tokenSecrets).To(HaveLen(1))
	g.Expect(tokenSecrets[0].Type).To(Equal(corev1.SecretTypeOpaque))
	g.Expect(tokenSecrets[0].Data).To(BeEmpty())
	expectBoundTo(g, tokenOf(g, kc), tokenSecrets[0])

	// The hub Secret records which cluster it points at.
	g.Expect(secret.Annotations).To(HaveKeyWithValue(registration.ClusterIDAnnotation, memberClusterID(g)))
	g.Expect(res.ClusterID).To(Equal(memberClusterID(g)))
	g.Expect(res.ServiceAccount).To(Equal(hubv1alpha1.DefaultSecretNamespace + "/configbundle-hub-member-one"))
}

func TestRegisterHonoursOptions(t *testing.T) {
	g := NewWithT(t)
	opts := baseOptions("member-custom")
	opts.SecretNamespace = "fleet"
	opts.SecretLabel = "example.com/member-kubeconfig"
	opts.SecretKey = "config.yaml"
	opts.MemberNamespace = "hub-access"
	opts.TokenDuration = time.Hour
	began := time.Now()
	res := register(t, opts)

	g.Expect(res.SecretNamespace).To(Equal("fleet"))
	g.Expect(res.Server).To(Equal(memberURL), "the server defaults to Member.Host")
	g.Expect(res.TokenExpires).To(BeTemporally("~", began.Add(time.Hour), time.Minute))

	secret := hubSecret(g, "fleet", "member-custom")
	g.Expect(secret.Labels).To(HaveKeyWithValue("example.com/member-kubeconfig", "true"))
	g.Expect(secret.Labels).NotTo(HaveKey(hubv1alpha1.DefaultSecretLabel))
	raw, kc := kubeconfigIn(g, secret, "config.yaml")
	g.Expect(kc.Clusters["member-custom"].Server).To(Equal(memberURL))
	c := memberClientFor(g, raw)
	g.Expect(c.List(t.Context(), &corev1.ConfigMapList{})).To(Succeed())

	binding := &rbacv1.ClusterRoleBinding{}
	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Name: registration.ClusterRoleBindingName("member-custom")}, binding)).To(Succeed())
	g.Expect(binding.Subjects).To(ConsistOf(HaveField("Namespace", "hub-access")))
	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Namespace: "hub-access", Name: registration.ServiceAccountName("member-custom")}, &corev1.ServiceAccount{})).To(Succeed())
	g.Expect(tokenSecretsOf(g, "hub-access", "member-custom")).To(HaveLen(1), "the token Secret is beside the ServiceAccount")
}

func TestLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	register(t, baseOptions("member-lp"))
	raw, _ := kubeconfigIn(g, hubSecret(g, hubv1alpha1.DefaultSecretNamespace, "member-lp"), hubv1alpha1.DefaultSecretKey)
	hub := memberClientFor(g, raw) // the member as the hub sees it

	// Fixtures, made by the member's admin.
	const ns = "least-privilege"
	g.Expect(memberAdmin.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	bundle := &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bundle"},
		Spec:       configbundlev1alpha1.ConfigBundleSpec{Message: "hello"},
	}
	g.Expect(memberAdmin.Create(t.Context(), bundle)).To(Succeed())

	t.Run("allows what the hub needs", func(t *testing.T) {
		g := NewWithT(t)
		ctx := t.Context()

		// configmaps: create, get, list, watch, update, delete.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bundle"}, Data: map[string]string{"message": "hello"}}
		g.Expect(hub.Create(ctx, cm)).To(Succeed())
		g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(hub.List(ctx, &corev1.ConfigMapList{})).To(Succeed(), "list configmaps in all namespaces")
		expectWatch(g, hub, &corev1.ConfigMapList{})
		cm.Data["message"] = "updated"
		g.Expect(hub.Update(ctx, cm)).To(Succeed())
		g.Expect(hub.Delete(ctx, cm)).To(Succeed())

		// configbundles: create and delete (FleetBundle placement), get, list, watch, update;
		// status: patch.
		placed := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placed"}, Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "x"}}
		g.Expect(hub.Create(ctx, placed)).To(Succeed())
		g.Expect(hub.Delete(ctx, placed)).To(Succeed())
		cb := &configbundlev1alpha1.ConfigBundle{}
		g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(bundle), cb)).To(Succeed())
		g.Expect(hub.List(ctx, &configbundlev1alpha1.ConfigBundleList{})).To(Succeed())
		expectWatch(g, hub, &configbundlev1alpha1.ConfigBundleList{})
		cb.Finalizers = []string{"configbundle.dev/test"}
		g.Expect(hub.Update(ctx, cb)).To(Succeed())
		before := cb.DeepCopy()
		cb.Status.ObservedGeneration = cb.Generation
		g.Expect(hub.Status().Patch(ctx, cb, client.MergeFrom(before))).To(Succeed())
		cb.Finalizers = nil
		g.Expect(hub.Update(ctx, cb)).To(Succeed())

		// events.k8s.io events: create.
		event := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Namespace: ns, Name: "bundle.drift"},
			EventTime:           metav1.NewMicroTime(time.Now()),
			ReportingController: "configbundle.dev/hub",
			ReportingInstance:   "hub-0",
			Action:              "Heal",
			Reason:              configbundlev1alpha1.DriftHealedEvent,
			Type:                corev1.EventTypeNormal,
			Regarding:           corev1.ObjectReference{APIVersion: configbundlev1alpha1.GroupVersion.String(), Kind: "ConfigBundle", Namespace: ns, Name: "bundle", UID: cb.UID},
		}
		g.Expect(hub.Create(ctx, event)).To(Succeed())

		// The namespace kube-system: get (its uid identifies the cluster).
		g.Expect(hub.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{})).To(Succeed())

		// namespaces: create (FleetBundles with spec.createNamespace), and nothing more.
		created := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "least-privilege-created"}}
		g.Expect(hub.Create(ctx, created)).To(Succeed())
		g.Expect(hub.Delete(ctx, created)).To(Satisfy(apierrors.IsForbidden), "delete a namespace")
		g.Expect(hub.Update(ctx, created)).To(Satisfy(apierrors.IsForbidden), "update a namespace")

		// The ConfigBundle CRD: list and watch with the field selector metadata.name, which RBAC
		// matches against resourceNames (the hub's watch of it, which keeps it).
		byName := client.MatchingFields{"metadata.name": "configbundles.configbundle.dev"}
		g.Expect(hub.List(ctx, &apiextensionsv1.CustomResourceDefinitionList{}, byName)).To(Succeed())
		w, err := hub.Watch(ctx, &apiextensionsv1.CustomResourceDefinitionList{}, byName)
		g.Expect(err).NotTo(HaveOccurred(), "watch the ConfigBundle CRD")
		w.Stop()
	})

	t.Run("refuses everything else", func(t *testing.T) {
		g := NewWithT(t)
		ctx := t.Context()
		g.Expect(hub.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns))).To(Satisfy(apierrors.IsForbidden), "deletecollection secrets")
		g.Expect(hub.List(ctx, &corev1.ServiceAccountList{}, client.InNamespace(hubv1alpha1.DefaultSecretNamespace))).To(Satisfy(apierrors.IsForbidden), "list serviceaccounts in the hub's own namespace")
		g.Expect(hub.Get(ctx, client.ObjectKey{Name: metav1.NamespaceDefault}, &corev1.Namespace{})).To(Satisfy(apierrors.IsForbidden), "get namespace default")
		g.Expect(hub.List(ctx, &corev1.NamespaceList{})).To(Satisfy(apierrors.IsForbidden), "list namespaces")
		g.Expect(hub.DeleteAllOf(ctx, &configbundlev1alpha1.ConfigBundle{}, client.InNamespace(ns))).To(Satisfy(apierrors.IsForbidden), "deletecollection configbundles")
		g.Expect(hub.Get(ctx, client.ObjectKey{Name: registration.RBACName}, &rbacv1.ClusterRole{})).To(Satisfy(apierrors.IsForbidden), "read its own ClusterRole")
		g.Expect(hub.List(ctx, &apiextensionsv1.CustomResourceDefinitionList{})).To(Satisfy(apierrors.IsForbidden), "list CRDs")

		other := otherCRD()
		g.Expect(hub.Apply(ctx, applyConfiguration(g, other), client.FieldOwner("configbundle-hub"), client.ForceOwnership)).
			To(Satisfy(apierrors.IsForbidden), "server-side apply (create) of another CRD")
		g.Expect(hub.Create(ctx, other.DeepCopy())).To(Satisfy(apierrors.IsForbidden), "create (POST) of another CRD")
		g.Expect(memberAdmin.Get(ctx, client.ObjectKeyFromObject(other), &apiextensionsv1.CustomResourceDefinition{})).To(Satisfy(apierrors.IsNotFound))
	})

	// Last: this deletes the ConfigBundle CRD (and with it every ConfigBundle) and has the hub's
	// credential install it again, as `hub --install-crds` does.
	t.Run("installs the ConfigBundle CRD by server-side apply", func(t *testing.T) {
		g := NewWithT(t)
		ctx := t.Context()
		crds, err := config.MemberCRDs()
		g.Expect(err).NotTo(HaveOccurred())
		crd := crds[0]
		g.Expect(crd.Name).To(Equal("configbundles.configbundle.dev"))

		g.Expect(memberAdmin.Delete(ctx, crd.DeepCopy())).To(Succeed())
		g.Eventually(func() error {
			return memberAdmin.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
		}).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsNotFound))

		// get by name is allowed; a POST create is not: its URL carries no name, so a rule
		// restricted by resourceNames cannot match it.
		g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})).To(Satisfy(apierrors.IsNotFound))
		g.Expect(hub.Create(ctx, crd.DeepCopy())).To(Satisfy(apierrors.IsForbidden), "create (POST) is refused under resourceNames")

		// Server-side apply is a PATCH to .../customresourcedefinitions/<name>: authorized as
		// patch of that name and, when it creates, as create of that name.
		g.Expect(hub.Apply(ctx, applyConfiguration(g, crd), client.FieldOwner("configbundle-hub"), client.ForceOwnership)).
			To(Succeed(), "server-side apply creates the CRD under resourceNames-restricted create/patch")
		g.Eventually(func(g Gomega) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(hub.Get(ctx, client.ObjectKeyFromObject(crd), got)).To(Succeed())
			g.Expect(got.Status.Conditions).To(ContainElement(And(
				HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
			g.Expect(hub.List(ctx, &configbundlev1alpha1.ConfigBundleList{})).To(Succeed())
		}).WithTimeout(timeout).WithPolling(interval).Should(Succeed())

		// Applying again (an update) works too.
		g.Expect(hub.Apply(ctx, applyConfiguration(g, crd), client.FieldOwner("configbundle-hub"), client.ForceOwnership)).To(Succeed())
	})
}

// expectWatch opens a watch of list and closes it.
func expectWatch(g Gomega, c client.WithWatch, list client.ObjectList) {
	ctx, cancel := context.WithTimeout(context.Background(), watchTimeout)
	defer cancel()
	w, err := c.Watch(ctx, list)
	g.Expect(err).NotTo(HaveOccurred(), "watch %T", list)
	w.Stop()
}

// applyConfiguration turns crd into a server-side apply request body.
func applyConfiguration(g Gomega, crd *apiextensionsv1.CustomResourceDefinition) runtime.ApplyConfiguration {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return client.ApplyConfigurationFromUnstructured(u)
}

// otherCRD is a CRD that is not the ConfigBundle CRD.
func otherCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

func TestReRegisterRotatesTokenInPlace(t *testing.T) {
	g := NewWithT(t)
	opts := baseOptions("member-rotate")
	first := register(t, opts)
	secret1 := hubSecret(g, hubv1alpha1.DefaultSecretNamespace, "member-rotate")
	_, kc1 := kubeconfigIn(g, secret1, hubv1alpha1.DefaultSecretKey)
	token1 := tokenOf(g, kc1)

	// Someone widens the ClusterRole; re-registering must restore exactly the member role.
	role := &rbacv1.ClusterRole{}
	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Name: registration.RBACName}, role)).To(Succeed())
	role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	g.Expect(memberAdmin.Update(t.Context(), role, client.FieldOwner("someone-else"))).To(Succeed())

	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	second, err := registration.Register(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.TokenExpires).To(BeTemporally(">=", first.TokenExpires))

	secret2 := hubSecret(g, hubv1alpha1.DefaultSecretNamespace, "member-rotate")
	g.Expect(secret2.UID).To(Equal(secret1.UID), "the Secret is updated in place")
	g.Expect(secret2.ResourceVersion).NotTo(Equal(secret1.ResourceVersion))
	g.Expect(secret2.Annotations[registration.TokenExpiresAnnotation]).To(Equal(second.TokenExpires.Format(time.RFC3339)))
	raw2, kc2 := kubeconfigIn(g, secret2, hubv1alpha1.DefaultSecretKey)
	token2 := tokenOf(g, kc2)
	g.Expect(token2 != token1).To(BeTrue(), "re-registering rotates the token")
	g.Expect(memberClientFor(g, raw2).List(t.Context(), &corev1.ConfigMapList{})).To(Succeed(), "the new token works")

	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Name: registration.RBACName}, role)).To(Succeed())
	g.Expect(role.Rules).To(Equal(memberRole(g).Rules), "the widened ClusterRole is restored")

	// No duplicates, here or on the hub.
	managed := client.MatchingLabels{hubv1alpha1.ManagedByLabel: registration.FieldOwner}
	roles := &rbacv1.ClusterRoleList{}
	g.Expect(memberAdmin.List(t.Context(), roles, managed)).To(Succeed())
	g.Expect(roles.Items).To(HaveLen(1))
	bindings := &rbacv1.ClusterRoleBindingList{}
	g.Expect(memberAdmin.List(t.Context(), bindings, managed)).To(Succeed())
	g.Expect(bindings.Items).To(HaveLen(1))
	sas := &corev1.ServiceAccountList{}
	g.Expect(memberAdmin.List(t.Context(), sas, managed)).To(Succeed())
	g.Expect(sas.Items).To(HaveLen(1))
	g.Expect(tokenSecretsOf(g, hubv1alpha1.DefaultSecretNamespace, "member-rotate")).To(HaveLen(1), "the previous token Secret is deleted")
	hubSecrets := &corev1.SecretList{}
	g.Expect(hubAdmin.List(t.Context(), hubSecrets, client.InNamespace(hubv1alpha1.DefaultSecretNamespace),
		client.MatchingLabels{hubv1alpha1.DefaultSecretLabel: "true"})).To(Succeed())
	g.Expect(hubSecrets.Items).To(HaveLen(1))
	g.Expect(hubSecrets.Items[0].Name).To(Equal("member-rotate"))
}

func TestUnregisterRemovesOnlyTheRegistration(t *testing.T) {
	g := NewWithT(t)
	opts := baseOptions("member-gone")
	register(t, opts)
	raw, _ := kubeconfigIn(g, hubSecret(g, hubv1alpha1.DefaultSecretNamespace, "member-gone"), hubv1alpha1.DefaultSecretKey)
	hub := memberClientFor(g, raw)

	// What the hub reconciled in the member: a ConfigBundle and its ConfigMap, one in the
	// registration's own namespace and one elsewhere.
	const tenant = "tenant"
	g.Expect(memberAdmin.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}})).To(Succeed())
	var kept []client.Object
	for _, ns := range []string{hubv1alpha1.DefaultSecretNamespace, tenant} {
		cb := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-me"}, Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "hello"}}
		g.Eventually(func() error { return memberAdmin.Create(t.Context(), cb) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep-me"}, Data: map[string]string{"message": "hello"}}
		g.Expect(memberAdmin.Create(t.Context(), cm)).To(Succeed())
		kept = append(kept, cb, cm)
	}

	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	g.Expect(unregister(ctx, opts)).To(Succeed())

	g.Expect(hubAdmin.Get(ctx, client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "member-gone"}, &corev1.Secret{})).
		To(Satisfy(apierrors.IsNotFound), "the hub Secret is deleted")
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: registration.ClusterRoleBindingName("member-gone")}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: registration.RBACName}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: registration.ServiceAccountName("member-gone")}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: registration.RenewalRoleName("member-gone")}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: registration.RenewalRoleName("member-gone")}},
	} {
		g.Expect(memberAdmin.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Satisfy(apierrors.IsNotFound), "%T %s", obj, obj.GetName())
	}
	g.Expect(tokenSecretsOf(g, hubv1alpha1.DefaultSecretNamespace, "member-gone")).To(BeEmpty())
	ns := &corev1.Namespace{}
	g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Name: hubv1alpha1.DefaultSecretNamespace}, ns)).To(Succeed(), "the namespace stays")
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	for _, want := range kept {
		got := want.DeepCopyObject().(client.Object)
		g.Expect(memberAdmin.Get(ctx, client.ObjectKeyFromObject(want), got)).To(Succeed(), "%T %s/%s", want, want.GetNamespace(), want.GetName())
		g.Expect(got.GetUID()).To(Equal(want.GetUID()))
		g.Expect(got.GetResourceVersion()).To(Equal(want.GetResourceVersion()), "%T %s/%s untouched", want, want.GetNamespace(), want.GetName())
		g.Expect(got.GetDeletionTimestamp()).To(BeNil())
	}

	// The token is worthless now: its ServiceAccount is gone.
	g.Eventually(func() error {
		return hub.Get(t.Context(), client.ObjectKey{Name: metav1.NamespaceSystem}, &corev1.Namespace{})
	}).WithTimeout(timeout).WithPolling(interval).Should(Satisfy(apierrors.IsUnauthorized))

	err := unregister(ctx, opts)
	g.Expect(err).To(MatchError(registration.ErrNotRegistered), "unregistering twice is refused: it is not a member any more")
	t.Logf("error: %v", err)
}

func TestUnregisterUnreachableMember(t *testing.T) {
	g := NewWithT(t)
	opts := baseOptions("member-lost")
	register(t, opts) // its cleanup, with the reachable member, removes what this test leaves

	lost := opts
	lost.Member = rest.CopyConfig(memberCP.Config)
	lost.Member.Host = "https://127.0.0.1:1"
	ctx, cancel := context.WithTimeout(t.Context(), unreachableTimeout)
	defer cancel()
	err := unregister(ctx, lost)
	g.Expect(err).To(HaveOccurred())
	t.Logf("error: %v", err)
	g.Expect(err.Error()).To(And(
		ContainSubstring("deleted Secret configbundle-system/member-lost on the hub"),
		ContainSubstring("left behind in the member"),
		ContainSubstring("ClusterRoleBinding configbundle-hub-member"),
		ContainSubstring("ClusterRole configbundle-hub-member"),
		ContainSubstring("ServiceAccount configbundle-system/configbundle-hub"),
		ContainSubstring("127.0.0.1:1"),
	))
	g.Expect(hubAdmin.Get(t.Context(), client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: "member-lost"}, &corev1.Secret{})).
		To(Satisfy(apierrors.IsNotFound), "the hub Secret is deleted all the same")
	g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Name: registration.RBACName}, &rbacv1.ClusterRole{})).
		To(Succeed(), "what the error says was left behind is indeed there")

	// The member is no longer registered: what was left behind is removed by hand, as the error
	// says.
	g.Expect(unregister(ctx, opts)).To(MatchError(registration.ErrNotRegistered))
	ns := hubv1alpha1.DefaultSecretNamespace
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: registration.ClusterRoleBindingName("member-lost")}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: registration.ServiceAccountName("member-lost")}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: registration.RBACName}},
	} {
		g.Expect(memberAdmin.Delete(t.Context(), obj)).To(Succeed(), "%T %s", obj, obj.GetName())
	}
	for _, s := range tokenSecretsOf(g, ns, "member-lost") {
		g.Expect(memberAdmin.Delete(t.Context(), &s)).To(Succeed())
	}
}

func TestRegisterRejectsBadInput(t *testing.T) {
	// Each case uses its own hub namespace, which must not exist afterwards.
	unreachable := rest.CopyConfig(memberCP.Config)
	unreachable.Host = "https://127.0.0.1:1"
	cases := []struct {
		name   string
		modify func(*registration.Options)
		want   string
	}{
		{"empty name", func(o *registration.Options) { o.Name = "" }, `invalid member name ""`},
		{"upper-case name", func(o *registration.Options) { o.Name = "Member" }, `invalid member name "Member"`},
		{"underscore in name", func(o *registration.Options) { o.Name = "member_1" }, `invalid member name "member_1"`},
		{"name too long", func(o *registration.Options) { o.Name = strings.Repeat("m", 254) }, "invalid member name"},
		{"no member", func(o *registration.Options) { o.Member = nil }, "Options.Member is nil"},
		{"no hub", func(o *registration.Options) { o.Hub = nil }, "Options.Hub is nil"},
		{"server without scheme", func(o *registration.Options) { o.Server = "member:6443" }, `invalid server "member:6443"`},
		{"token too short", func(o *registration.Options) { o.TokenDuration = 5 * time.Minute }, "token duration 5m0s is too short"},
		{"bad label", func(o *registration.Options) { o.SecretLabel = "not a label" }, `invalid Secret label "not a label"`},
		{"bad member namespace", func(o *registration.Options) { o.MemberNamespace = "Hub" }, `invalid member namespace "Hub"`},
		{"bad label key", func(o *registration.Options) { o.Labels = map[string]string{"not a key": "x"} }, `invalid label key "not a key"`},
		{"bad label value", func(o *registration.Options) { o.Labels = map[string]string{"env": "no spaces"} }, `invalid value "no spaces" of label "env"`},
		{"reserved label", func(o *registration.Options) { o.Labels = map[string]string{hubv1alpha1.ManagedByLabel: "me"} }, "reserved"},
		{"unreachable member", func(o *registration.Options) { o.Member = rest.CopyConfig(unreachable) }, "127.0.0.1:1"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			opts := baseOptions("member-bad")
			opts.SecretNamespace = "bad-input-" + string(rune('a'+i))
			tc.modify(&opts)
			ctx, cancel := context.WithTimeout(t.Context(), unreachableTimeout)
			defer cancel()
			began := time.Now()
			res, err := registration.Register(ctx, opts)
			g.Expect(err).To(HaveOccurred())
			g.Expect(res).To(BeNil())
			g.Expect(time.Since(began)).To(BeNumerically("<", unreachableTimeout), "fails fast")
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			t.Logf("error: %v", err)

			// Nothing on the hub.
			g.Expect(hubAdmin.Get(t.Context(), client.ObjectKey{Name: opts.SecretNamespace}, &corev1.Namespace{})).To(Satisfy(apierrors.IsNotFound))
			hubSecrets := &corev1.SecretList{}
			g.Expect(hubAdmin.List(t.Context(), hubSecrets, client.MatchingLabels{hubv1alpha1.DefaultSecretLabel: "true"})).To(Succeed())
			g.Expect(hubSecrets.Items).To(BeEmpty())
			// Nor in the member.
			g.Expect(memberAdmin.Get(t.Context(), client.ObjectKey{Name: registration.RBACName}, &rbacv1.ClusterRole{})).To(Satisfy(apierrors.IsNotFound))
		})
	}

	t.Run("unregister with an invalid name", func(t *testing.T) {
		g := NewWithT(t)
		err := unregister(t.Context(), baseOptions("Not_A_Name"))
		g.Expect(err).To(MatchError(ContainSubstring(`invalid member name "Not_A_Name"`)))
	})
}

func TestVerificationRefusesCredentialsThatDoNotWork(t *testing.T) {
	t.Parallel()
	// A ServiceAccount the member knows but grants nothing, and a token the member never issued.
	g := NewWithT(t)
	nobody := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "nobody"}}
	g.Expect(memberAdmin.Create(t.Context(), nobody)).To(Succeed())
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}
	g.Expect(memberAdmin.SubResource("token").Create(t.Context(), nobody, tr)).To(Succeed())

	for _, tc := range []struct {
		name, token, want string
	}{
		{"no permissions", tr.Status.Token, "forbidden"},
		{"unknown token", "not-a-token", "Unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			kubeconfig, err := registration.BuildKubeconfig("nobody", memberURL, memberCP.Config, tc.token)
			g.Expect(err).NotTo(HaveOccurred())
			// Refusals are retried (the API server may not know a new ServiceAccount yet) until
			// the context ends.
			ctx, cancel := context.WithTimeout(t.Context(), verifyGiveUp)
			defer cancel()
			err = registration.Verify(ctx, kubeconfig, memberCP.Config, memberURL)
			g.Expect(err).To(HaveOccurred())
			t.Logf("error: %v", err)
			g.Expect(err.Error()).To(And(
				ContainSubstring("verifying the new credential against the member ("+memberURL+")"),
				ContainSubstring("nothing was written to the hub"),
				ContainSubstring("get namespace kube-system"),
				ContainSubstring(tc.want),
			))
			g.Expect(err.Error()).NotTo(ContainSubstring(tc.token), "the error does not carry the token")
		})
	}
}

// tokenSecretsOf lists the token Secrets of the registration name in the member namespace ns.
func tokenSecretsOf(g Gomega, ns, name string) []corev1.Secret {
	list := &corev1.SecretList{}
	g.Expect(memberAdmin.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{hubv1alpha1.ManagedByLabel: registration.FieldOwner})).To(Succeed())
	var owned []corev1.Secret
	for _, s := range list.Items {
		if s.Annotations[registration.RegistrationAnnotation] == name {
			owned = append(owned, s)
		}
	}
	return owned
}

// memberClusterID is the member's identity: the uid of its kube-system namespace.
func memberClusterID(g Gomega) string {
	ns := &corev1.Namespace{}
	g.Expect(memberAdmin.Get(context.Background(), client.ObjectKey{Name: metav1.NamespaceSystem}, ns)).To(Succeed())
	return string(ns.UID)
}

// expectBoundTo checks, from the token's claims, that it is bound to the Secret s.
func expectBoundTo(g Gomega, token string, s corev1.Secret) {
	parts := strings.Split(token, ".")
	g.Expect(parts).To(HaveLen(3), "a JWT")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	g.Expect(err).NotTo(HaveOccurred())
	var claims struct {
		Kubernetes struct {
			Secret *struct{ Name, UID string } `json:"secret"`
		} `json:"kubernetes.io"`
	}
	g.Expect(json.Unmarshal(payload, &claims)).To(Succeed())
	g.Expect(claims.Kubernetes.Secret).NotTo(BeNil(), "the token is bound to a Secret")
	g.Expect(*claims.Kubernetes.Secret).To(Equal(struct{ Name, UID string }{s.Name, string(s.UID)}))
}

// RemovePlaced deletes exactly the bundles FleetBundles placed (label and uid annotation) before
// the identity is revoked; without a hub to let go of the member, Unregister deletes its
// MemberCluster itself.
func TestUnregisterRemovePlaced(t *testing.T) {
	g := NewWithT(t)
	defer func(was time.Duration) { *registration.ReleaseTimeout = was }(*registration.ReleaseTimeout)
	*registration.ReleaseTimeout = time.Second
	opts := baseOptions("member-placed")
	opts.Labels = map[string]string{"env": "test"} // creates its MemberCluster; no hub runs to delete it
	register(t, opts)

	const ns = "placed"
	g.Expect(client.IgnoreAlreadyExists(memberAdmin.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
	bundle := func(name string, labels, annotations map[string]string) *configbundlev1alpha1.ConfigBundle {
		b := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
			Spec: configbundlev1alpha1.ConfigBundleSpec{Message: name}}
		g.Expect(memberAdmin.Create(t.Context(), b)).To(Succeed())
		return b
	}
	placedBy := func(fb string) map[string]string {
		return map[string]string{hubv1alpha1.FleetBundleLabel: "fleet." + fb}
	}
	uid := map[string]string{hubv1alpha1.FleetBundleUIDAnnotation: "1b2c"}
	removed := []*configbundlev1alpha1.ConfigBundle{bundle("web", placedBy("web"), uid), bundle("api", placedBy("api"), uid)}
	kept := []*configbundlev1alpha1.ConfigBundle{
		bundle("local", nil, nil),
		bundle("label-only", placedBy("label-only"), nil),
		bundle("annotation-only", nil, uid),
	}

	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	opts.RemovePlaced = true
	res, err := registration.Unregister(ctx, opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*res).To(Equal(registration.Unregistration{RemovedPlaced: 2, DeletedMemberCluster: true}))

	for _, b := range removed {
		g.Expect(memberAdmin.Get(ctx, client.ObjectKeyFromObject(b), &configbundlev1alpha1.ConfigBundle{})).To(Satisfy(apierrors.IsNotFound), b.Name)
	}
	for _, b := range kept {
		got := &configbundlev1alpha1.ConfigBundle{}
		g.Expect(memberAdmin.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed(), b.Name)
		g.Expect(got.ResourceVersion).To(Equal(b.ResourceVersion), "%s untouched", b.Name)
	}
	g.Expect(hubAdmin.Get(ctx, client.ObjectKey{Name: "member-placed"}, &hubv1alpha1.MemberCluster{})).To(Satisfy(apierrors.IsNotFound))
	g.Expect(tokenSecretsOf(g, hubv1alpha1.DefaultSecretNamespace, "member-placed")).To(BeEmpty(), "and the identity is revoked")
	g.Expect(memberAdmin.Get(ctx, client.ObjectKey{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: registration.ServiceAccountName("member-placed")}, &corev1.ServiceAccount{})).
		To(Satisfy(apierrors.IsNotFound))
}
