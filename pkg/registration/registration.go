package registration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/pkg/kubeconfig"
)

// Defaults of Options; the Secret contract's (namespace, label, key) are the hub API's.
const (
	// DefaultTokenDuration is the default of Options.TokenDuration: one year.
	DefaultTokenDuration = 8760 * time.Hour
	// MinTokenDuration is the shortest token the TokenRequest API issues.
	MinTokenDuration = 10 * time.Minute
)

// Names and markers of what Register writes.
const (
	// ServiceAccountName is the hub's identity in the member, in Options.MemberNamespace.
	ServiceAccountName = hubv1alpha1.HubName
	// RBACName names the ClusterRole and the ClusterRoleBinding granting the hub's identity the
	// rules of config.MemberClusterRole.
	RBACName = "configbundle-hub-member"
	// FieldOwner is the server-side apply field manager of everything Register writes.
	FieldOwner = "configbundle-register"
	// TokenExpiresAnnotation on the hub Secret holds the token's expiry, RFC 3339, UTC.
	TokenExpiresAnnotation = "configbundle.dev/token-expires"
)

// Options of Register and Unregister; each field documents its default.
type Options struct {
	// Name of the member: the name of the hub Secret, and of the kubeconfig's cluster, user and
	// context. Required; a DNS-1123 subdomain.
	Name string

	// Member holds admin-ish credentials for the member cluster: enough to create namespaces,
	// ServiceAccounts, ClusterRoles and ClusterRoleBindings and to request ServiceAccount tokens.
	// Required. It is copied, never modified, and never written anywhere.
	Member *rest.Config

	// Hub holds credentials for the hub cluster: enough to apply and delete Secrets in
	// SecretNamespace (and to create it when it is missing). Required.
	Hub *rest.Config

	// Server is the API server URL written into the Secret's kubeconfig, for addresses only the
	// hub can reach (such as kind's --internal addresses); an http(s) URL. The new credential is
	// still verified through Member.Host. Defaults to Member.Host as client-go reads it (a bare
	// host:port gets https:// when Member has TLS settings).
	Server string

	// SecretNamespace is the hub namespace of the Secret. Defaults to
	// hubv1alpha1.DefaultSecretNamespace ("configbundle-system"); created if missing.
	SecretNamespace string

	// SecretLabel is the label key set to "true" on the Secret. Defaults to
	// hubv1alpha1.DefaultSecretLabel ("sigs.k8s.io/multicluster-runtime-kubeconfig").
	SecretLabel string

	// SecretKey is the key of the Secret's data holding the kubeconfig. Defaults to
	// hubv1alpha1.DefaultSecretKey ("kubeconfig").
	SecretKey string

	// MemberNamespace is the member namespace of the ServiceAccount. Defaults to
	// hubv1alpha1.DefaultSecretNamespace ("configbundle-system"); created if missing, never
	// deleted.
	MemberNamespace string

	// TokenDuration is the requested lifetime of the ServiceAccount token; at least
	// MinTokenDuration. The API server may shorten it: Result.TokenExpires is the real expiry.
	// Defaults to DefaultTokenDuration (one year).
	TokenDuration time.Duration
}

// Result describes a registration.
type Result struct {
	// SecretName and SecretNamespace locate the hub Secret.
	SecretName, SecretNamespace string
	// TokenExpires is when the token in the Secret expires, as the API server issued it.
	TokenExpires time.Time
	// Server is the API server URL written into the kubeconfig.
	Server string
}

// verifyTimeout bounds how long Register waits for a freshly issued credential to be accepted by
// the member: the API server learns of new ServiceAccounts and RBAC bindings through informers,
// so the first requests may be refused for a moment.
const verifyTimeout = 30 * time.Second

// options are validated Options with their defaults applied.
type options struct {
	Options
	memberURL string // Member.Host as a URL: where Register talks to the member
}

// complete applies the defaults of o and validates it; forRegister adds the checks of what only
// Register uses.
func (o Options) complete(forRegister bool) (*options, error) {
	o.defaults()
	opts, err := o.validate()
	if err != nil || !forRegister {
		return opts, err
	}
	return opts, opts.validateForRegister()
}

// defaults applies the defaults of Options: the one place they are applied.
func (o *Options) defaults() {
	o.SecretNamespace = cmp.Or(o.SecretNamespace, hubv1alpha1.DefaultSecretNamespace)
	o.MemberNamespace = cmp.Or(o.MemberNamespace, hubv1alpha1.DefaultSecretNamespace)
	o.SecretLabel = cmp.Or(o.SecretLabel, hubv1alpha1.DefaultSecretLabel)
	o.SecretKey = cmp.Or(o.SecretKey, hubv1alpha1.DefaultSecretKey)
	o.TokenDuration = cmp.Or(o.TokenDuration, DefaultTokenDuration)
}

// validate checks what Register and Unregister both use.
func (o Options) validate() (*options, error) {
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return nil, fmt.Errorf("invalid member name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if o.Member == nil {
		return nil, errors.New("no credentials for the member cluster (Options.Member is nil)")
	}
	if o.Hub == nil {
		return nil, errors.New("no credentials for the hub cluster (Options.Hub is nil)")
	}
	if o.Member.Host == "" {
		return nil, errors.New("the member's credentials name no API server (Options.Member.Host is empty)")
	}
	for what, ns := range map[string]string{"hub Secret namespace": o.SecretNamespace, "member namespace": o.MemberNamespace} {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("invalid %s %q: %s", what, ns, strings.Join(errs, "; "))
		}
	}
	if errs := validation.IsQualifiedName(o.SecretLabel); len(errs) > 0 {
		return nil, fmt.Errorf("invalid Secret label %q: %s", o.SecretLabel, strings.Join(errs, "; "))
	}
	if errs := validation.IsConfigMapKey(o.SecretKey); len(errs) > 0 {
		return nil, fmt.Errorf("invalid Secret key %q: %s", o.SecretKey, strings.Join(errs, "; "))
	}
	u, _, err := rest.DefaultServerUrlFor(o.Member)
	if err != nil {
		return nil, fmt.Errorf("invalid member API server %q: %w", o.Member.Host, err)
	}
	if u.Path == "/" {
		u.Path = "" // https://host:6443/ and https://host:6443 are the same server
	}
	return &options{Options: o, memberURL: u.String()}, nil
}

// validateForRegister checks what only Register uses, and defaults Server to the member's URL.
func (o *options) validateForRegister() error {
	if o.TokenDuration < MinTokenDuration {
		return fmt.Errorf("token duration %s is too short: the TokenRequest API issues tokens of at least %s", o.TokenDuration, MinTokenDuration)
	}
	if o.Server == "" {
		o.Server = o.memberURL
	} else if s, err := url.Parse(o.Server); err != nil || (s.Scheme != "https" && s.Scheme != "http") || s.Host == "" {
		return fmt.Errorf("invalid server %q: want an http(s) URL such as https://10.0.0.1:6443", o.Server)
	}
	return nil
}

// Register registers the member opts.Name with the hub:
//
//  1. in the member, it server-side applies (field manager FieldOwner, forced) the namespace
//     MemberNamespace if missing, the ServiceAccount ServiceAccountName, and the ClusterRole and
//     ClusterRoleBinding RBACName granting it exactly the rules of config.MemberClusterRole,
//     all labelled ManagedByLabel=FieldOwner;
//  2. it requests a token for the ServiceAccount with the TokenRequest API;
//  3. it renders a self-contained kubeconfig with that token;
//  4. it verifies, through Member.Host, that the member accepts the credential (get namespace
//     kube-system, list configmaps);
//  5. only then it applies, on the hub, the Secret opts.Name in SecretNamespace (created if
//     missing): type Opaque, data[SecretKey] = kubeconfig, labels SecretLabel="true" and
//     ManagedByLabel=FieldOwner, annotation TokenExpiresAnnotation.
//
// Register is idempotent: running it again rotates the token and updates the Secret in place.
// The previous token stays valid until it expires or the ServiceAccount is deleted (Unregister).
// If it fails before step 5, nothing has been written to the hub.
func Register(ctx context.Context, opts Options) (*Result, error) {
	o, err := opts.complete(true)
	if err != nil {
		return nil, fmt.Errorf("registering member: %w", err)
	}
	res, err := o.register(ctx)
	if err != nil {
		return nil, fmt.Errorf("registering member %q: %w", o.Name, err)
	}
	return res, nil
}

func (o *options) register(ctx context.Context) (*Result, error) {
	role, err := config.MemberClusterRole()
	if err != nil {
		return nil, err
	}
	member, err := newClient(o.Member)
	if err != nil {
		return nil, fmt.Errorf("building a client for the member: %w", err)
	}
	hub, err := newClient(o.Hub)
	if err != nil {
		return nil, fmt.Errorf("building a client for the hub: %w", err)
	}

	// 1. The hub's identity in the member.
	sa := corev1ac.ServiceAccount(ServiceAccountName, o.MemberNamespace).WithLabels(managedBy())
	if err := applyInNamespace(ctx, member, o.MemberNamespace, sa); err != nil {
		return nil, fmt.Errorf("applying ServiceAccount %s/%s in the member (%s): %w", o.MemberNamespace, ServiceAccountName, o.memberURL, err)
	}
	if err := apply(ctx, member, clusterRole(role.Rules)); err != nil {
		return nil, fmt.Errorf("applying ClusterRole %s in the member: %w", RBACName, err)
	}
	if err := apply(ctx, member, clusterRoleBinding(o.MemberNamespace)); err != nil {
		return nil, fmt.Errorf("applying ClusterRoleBinding %s in the member: %w", RBACName, err)
	}

	// 2. A token for it.
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(o.TokenDuration / time.Second)),
	}}
	saObj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName, Namespace: o.MemberNamespace}}
	if err := member.SubResource("token").Create(ctx, saObj, tr); err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s in the member: %w", o.MemberNamespace, ServiceAccountName, err)
	}
	if tr.Status.Token == "" {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s in the member: the API server returned no token", o.MemberNamespace, ServiceAccountName)
	}
	expires := tr.Status.ExpirationTimestamp.UTC()

	// 3. The kubeconfig.
	kc, err := buildKubeconfig(o.Name, o.Server, o.Member, tr.Status.Token)
	if err != nil {
		return nil, err
	}

	// 4. Proof that the hub will accept it and that it works, before the hub is touched.
	if _, err := kubeconfig.RESTConfig(kc); err != nil {
		return nil, fmt.Errorf("the kubeconfig written for the hub would be refused by it: %w", err)
	}
	if err := verify(ctx, kc, o.Member, o.memberURL); err != nil {
		return nil, err
	}

	// 5. The Secret on the hub.
	secret := corev1ac.Secret(o.Name, o.SecretNamespace).
		WithLabels(managedBy()).
		WithLabels(map[string]string{o.SecretLabel: "true"}).
		WithAnnotations(map[string]string{TokenExpiresAnnotation: expires.Format(time.RFC3339)}).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{o.SecretKey: kc})
	if err := applyInNamespace(ctx, hub, o.SecretNamespace, secret); err != nil {
		return nil, fmt.Errorf("applying Secret %s/%s on the hub (%s): %w", o.SecretNamespace, o.Name, o.Hub.Host, err)
	}
	return &Result{SecretName: o.Name, SecretNamespace: o.SecretNamespace, TokenExpires: expires, Server: o.Server}, nil
}

// Unregister undoes Register: it deletes the hub Secret opts.Name in SecretNamespace, then, in
// the member, the ClusterRoleBinding and ClusterRole RBACName and the ServiceAccount
// ServiceAccountName in MemberNamespace (which invalidates every token issued for it). Objects
// already gone are skipped. Namespaces and everything else, such as the ConfigBundles and
// ConfigMaps the hub reconciled, are left untouched. Only Name, Member, Hub, SecretNamespace and
// MemberNamespace are used.
//
// If the hub Secret cannot be deleted, the member is not touched. If the member cannot be
// cleaned up (for instance because it is unreachable), the hub Secret is still deleted and the
// error names what was left behind in the member.
func Unregister(ctx context.Context, opts Options) error {
	o, err := opts.complete(false)
	if err != nil {
		return fmt.Errorf("unregistering member: %w", err)
	}
	if err := o.unregister(ctx); err != nil {
		return fmt.Errorf("unregistering member %q: %w", o.Name, err)
	}
	return nil
}

func (o *options) unregister(ctx context.Context) error {
	hub, err := newClient(o.Hub)
	if err != nil {
		return fmt.Errorf("building a client for the hub: %w", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.SecretNamespace}}
	if err := client.IgnoreNotFound(hub.Delete(ctx, secret)); err != nil {
		return fmt.Errorf("deleting Secret %s/%s on the hub (%s); nothing was deleted in the member: %w", o.SecretNamespace, o.Name, o.Hub.Host, err)
	}

	objects := []struct {
		what string
		obj  client.Object
	}{
		{"ClusterRoleBinding " + RBACName, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: RBACName}}},
		{"ClusterRole " + RBACName, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: RBACName}}},
		{"ServiceAccount " + o.MemberNamespace + "/" + ServiceAccountName, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName, Namespace: o.MemberNamespace}}},
	}
	var (
		leftBehind []string
		errs       []error
	)
	member, err := newClient(o.Member)
	if err != nil {
		errs = append(errs, fmt.Errorf("building a client for the member: %w", err))
		for _, x := range objects {
			leftBehind = append(leftBehind, x.what)
		}
	} else {
		for _, x := range objects {
			if err := client.IgnoreNotFound(member.Delete(ctx, x.obj)); err != nil {
				leftBehind = append(leftBehind, x.what)
				errs = append(errs, fmt.Errorf("deleting %s: %w", x.what, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("deleted Secret %s/%s on the hub, but could not clean up the member (%s); left behind in the member: %s: %w",
			o.SecretNamespace, o.Name, o.memberURL, strings.Join(leftBehind, ", "), errors.Join(errs...))
	}
	return nil
}

// newClient returns an uncached client for cfg, which it copies.
func newClient(cfg *rest.Config) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = FieldOwner
	return client.New(cfg, client.Options{})
}

func managedBy() map[string]string {
	return map[string]string{hubv1alpha1.ManagedByLabel: FieldOwner}
}

func apply(ctx context.Context, c client.Client, ac runtime.ApplyConfiguration) error {
	return c.Apply(ctx, ac, client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// applyInNamespace applies ac, an object in namespace ns; if ns does not exist, it applies ns
// (labelled as managed by Register) and retries. An existing namespace is left as it is.
func applyInNamespace(ctx context.Context, c client.Client, ns string, ac runtime.ApplyConfiguration) error {
	err := apply(ctx, c, ac)
	if !isNamespaceNotFound(err) {
		return err
	}
	if err := apply(ctx, c, corev1ac.Namespace(ns).WithLabels(managedBy())); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return apply(ctx, c, ac)
}

func isNamespaceNotFound(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces"
}

func clusterRole(rules []rbacv1.PolicyRule) *rbacv1ac.ClusterRoleApplyConfiguration {
	cr := rbacv1ac.ClusterRole(RBACName).WithLabels(managedBy())
	for _, r := range rules {
		cr.WithRules(rbacv1ac.PolicyRule().
			WithAPIGroups(r.APIGroups...).
			WithResources(r.Resources...).
			WithResourceNames(r.ResourceNames...).
			WithVerbs(r.Verbs...).
			WithNonResourceURLs(r.NonResourceURLs...))
	}
	return cr
}

func clusterRoleBinding(namespace string) *rbacv1ac.ClusterRoleBindingApplyConfiguration {
	return rbacv1ac.ClusterRoleBinding(RBACName).WithLabels(managedBy()).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(RBACName)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithNamespace(namespace).WithName(ServiceAccountName))
}
