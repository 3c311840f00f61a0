package registration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
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
	// ServiceAccountPrefix begins the name of every registration's ServiceAccount in the member
	// (ServiceAccountName).
	ServiceAccountPrefix = hubv1alpha1.HubName + "-"
	// RBACName names the ClusterRole granting the hub the rules of config.MemberClusterRole,
	// shared by the registrations of a member: each binds it with its own ClusterRoleBinding
	// (ClusterRoleBindingName). Unregister deletes it with the last binding that refers to it.
	RBACName = "configbundle-hub-member"
	// LegacyServiceAccountName is the ServiceAccount every registration of a member shared
	// before each had its own, bound by the ClusterRoleBinding RBACName. Register and Unregister
	// delete both once no registration on the hub may still use them.
	LegacyServiceAccountName = hubv1alpha1.HubName
	// FieldOwner is the server-side apply field manager of everything Register writes.
	FieldOwner = "configbundle-register"
	// TokenExpiresAnnotation on the hub Secret holds the token's expiry, RFC 3339, UTC.
	TokenExpiresAnnotation = "configbundle.dev/token-expires"
	// ClusterIDAnnotation on the hub Secret holds the uid of the member's kube-system namespace,
	// which identifies the cluster: the hub API's contract.
	ClusterIDAnnotation = hubv1alpha1.ClusterIDAnnotation
	// RegistrationAnnotation on the ServiceAccount, ClusterRoleBinding and token Secrets that
	// Register creates in the member names the registration (the member name on the hub) they
	// belong to.
	RegistrationAnnotation = "hub.configbundle.dev/registration"
)

// Refusals: Register and Unregister return errors wrapping these, and change nothing, when
// they refuse.
var (
	// ErrNotRegistered: Unregister was asked for a name that is not a member on the hub.
	ErrNotRegistered = errors.New("not a registered member")
	// ErrDuplicateCluster: Register was asked to register a cluster that already is a member
	// under another name (without Options.Force).
	ErrDuplicateCluster = errors.New("the cluster is already a member under another name")
	// ErrOtherCluster: the member credentials reach another cluster than the one the name is
	// registered for (Unregister; Register without Options.Force).
	ErrOtherCluster = errors.New("the member credentials reach another cluster than the registered one")
	// ErrUnknownCluster: Unregister cannot tell which cluster the name is registered for.
	ErrUnknownCluster = errors.New("the registered cluster is unknown")
	// ErrHubAsMember: Register was asked to register the hub cluster itself (the member's
	// kube-system uid is the hub's) without Options.AllowHubAsMember.
	ErrHubAsMember = errors.New("the member is the hub cluster itself")
)

// Options of Register, Unregister and WaitReady; each field documents its default.
type Options struct {
	// Name of the member: the name of the hub Secret and of the MemberCluster, of the
	// kubeconfig's cluster, user and context, and (through ServiceAccountName and
	// ClusterRoleBindingName) of the hub's identity in the member. Required; a DNS-1123 subdomain.
	Name string

	// Member holds admin-ish credentials for the member cluster: enough to create namespaces,
	// ServiceAccounts, Secrets, ClusterRoles, ClusterRoleBindings, Roles and RoleBindings, to
	// request ServiceAccount
	// tokens, and to read the namespace kube-system (with RemovePlaced, also to list and delete
	// ConfigBundles). Required (but by WaitReady). It is copied, never modified, and never
	// written anywhere.
	Member *rest.Config

	// Hub holds credentials for the hub cluster: enough to list, apply and delete Secrets in
	// SecretNamespace (and to create it when it is missing), to list, apply and delete
	// MemberClusters, and (Register, unless AllowHubAsMember) to read the namespace kube-system,
	// the hub's own identity. Required.
	Hub *rest.Config

	// Server is the API server URL written into the Secret's kubeconfig, for addresses only the
	// hub can reach (such as kind's --internal addresses); an http(s) URL. The new credential is
	// still verified through Member.Host. Defaults to Member.Host as client-go reads it (a bare
	// host:port gets https:// when Member has TLS settings).
	Server string

	// SecretNamespace is the hub namespace of the Secret. Defaults to
	// hubv1alpha1.DefaultSecretNamespace ("configbundle-system"); created if missing.
	SecretNamespace string

	// SecretLabel is the label key set to "true" on the Secret; a Secret in SecretNamespace with
	// it is a registered member. Defaults to hubv1alpha1.DefaultSecretLabel
	// ("sigs.k8s.io/multicluster-runtime-kubeconfig").
	SecretLabel string

	// SecretKey is the key of the Secret's data holding the kubeconfig. Defaults to
	// hubv1alpha1.DefaultSecretKey ("kubeconfig").
	SecretKey string

	// MemberNamespace is the member namespace of the ServiceAccount and its token Secrets.
	// Defaults to hubv1alpha1.DefaultSecretNamespace ("configbundle-system"); created if missing,
	// never deleted.
	MemberNamespace string

	// TokenDuration is the requested lifetime of the ServiceAccount token; at least
	// MinTokenDuration. The API server may shorten it: Result.TokenExpires is the real expiry.
	// Defaults to DefaultTokenDuration (one year).
	TokenDuration time.Duration

	// Labels are set on the MemberCluster Name on the hub by server-side apply (field manager
	// FieldOwner, which then owns exactly these labels: one given the previous time and not now
	// is removed); the MemberCluster is created, with spec.secretRef, if the hub has not created
	// it yet. Keys and values are validated as Kubernetes labels; ManagedByLabel is reserved.
	// Defaults to nil: the MemberCluster's labels are left alone. Register and WaitReady only.
	Labels map[string]string

	// Force lets Register register a cluster that is already a member under another name (the
	// hub then manages it once, and reports the second name as DuplicateCluster), and point a
	// registered name at another cluster than the one it was registered for (whose identity for
	// the name is then left behind). Defaults to false: Register refuses both. Force does not
	// allow the hub cluster itself: see AllowHubAsMember.
	Force bool

	// AllowHubAsMember lets Register register the hub cluster itself (the member's kube-system
	// uid is the hub's): a hub that manages itself as a member, for single-cluster setups.
	// Defaults to false: Register refuses it (ErrHubAsMember) and changes nothing, since a member
	// kubeconfig left to its default is the hub's, and registering it by mistake would make the
	// hub install the ConfigBundle CRD and reconcile bundles in the hub cluster. Register only.
	AllowHubAsMember bool

	// RemovePlaced makes Unregister delete the ConfigBundles that FleetBundles placed in the
	// member (those with FleetBundleLabel and FleetBundleUIDAnnotation, each deleted as it was
	// listed, with a uid precondition), once the hub has let go of the member and before the
	// hub's access is revoked; their ConfigMaps go with them (garbage collection). Defaults to
	// false: they stay in the member, as every other ConfigBundle does, no longer healed.
	// Unregister only.
	RemovePlaced bool
}

// Result describes a registration.
type Result struct {
	// SecretName and SecretNamespace locate the hub Secret.
	SecretName, SecretNamespace string
	// TokenExpires is when the token in the Secret expires, as the API server issued it.
	TokenExpires time.Time
	// Server is the API server URL written into the kubeconfig.
	Server string
	// ClusterID is the uid of the member's kube-system namespace.
	ClusterID string
	// ServiceAccount is the hub's identity in the member, namespace/name.
	ServiceAccount string
	// RevokedTokens counts the token Secrets of previous registrations of Name in this member
	// that Register deleted, revoking their tokens.
	RevokedTokens int
}

// Unregistration describes what Unregister removed.
type Unregistration struct {
	// RemovedPlaced counts the placed ConfigBundles Unregister deleted in the member
	// (Options.RemovePlaced).
	RemovedPlaced int
	// DeletedMemberCluster says that Unregister deleted the MemberCluster Name itself, since no
	// hub did within releaseTimeout (none was running) (Options.RemovePlaced).
	DeletedMemberCluster bool
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
	if err := o.validateHub(); err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Label(o.MemberNamespace); len(errs) > 0 {
		return nil, fmt.Errorf("invalid member namespace %q: %s", o.MemberNamespace, strings.Join(errs, "; "))
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

// validateHub checks what locates the member on the hub.
func (o Options) validateHub() error {
	if errs := validation.IsDNS1123Label(o.SecretNamespace); len(errs) > 0 {
		return fmt.Errorf("invalid hub Secret namespace %q: %s", o.SecretNamespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsQualifiedName(o.SecretLabel); len(errs) > 0 {
		return fmt.Errorf("invalid Secret label %q: %s", o.SecretLabel, strings.Join(errs, "; "))
	}
	if errs := validation.IsConfigMapKey(o.SecretKey); len(errs) > 0 {
		return fmt.Errorf("invalid Secret key %q: %s", o.SecretKey, strings.Join(errs, "; "))
	}
	return validateLabels(o.Labels)
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
//  1. it reads the member's identity, the uid of its kube-system namespace, and refuses (changing
//     nothing) if it is the hub's own (ErrHubAsMember), unless opts.AllowHubAsMember; if another
//     registered member is the same cluster (ErrDuplicateCluster), or if Name is registered for
//     another cluster (ErrOtherCluster), unless opts.Force;
//  2. in the member, it server-side applies (field manager FieldOwner, forced) the namespace
//     MemberNamespace if missing, the ClusterRole RBACName with exactly the rules of
//     config.MemberClusterRole, and the registration's own ServiceAccount
//     ServiceAccountName(Name) and ClusterRoleBinding ClusterRoleBindingName(Name), and the Role
//     and RoleBinding RenewalRoleName(Name) that let that ServiceAccount request tokens for itself
//     (the hub renews its token: Renewer), all labelled ManagedByLabel=FieldOwner, all but the
//     ClusterRole annotated RegistrationAnnotation=Name;
//  3. it creates a token Secret (type Opaque, no data, annotated like the ServiceAccount) and
//     requests a token for the ServiceAccount with the TokenRequest API, bound to that Secret:
//     the API server refuses the token once the Secret is deleted;
//  4. it renders a self-contained kubeconfig with the token, runs it through the hub's
//     sanitiser, and verifies, through Member.Host, that the member accepts the credential (get
//     namespace kube-system, list configmaps);
//  5. only then it applies, on the hub, the Secret opts.Name in SecretNamespace (created if
//     missing): type Opaque, data[SecretKey] = kubeconfig, labels SecretLabel="true" and
//     ManagedByLabel=FieldOwner, annotations TokenExpiresAnnotation and ClusterIDAnnotation;
//  6. it deletes the registration's previous token Secrets, which revokes the previous tokens,
//     and the ServiceAccount and ClusterRoleBinding of registrations made before each had its
//     own (LegacyServiceAccountName), once no registration on the hub may still use them;
//  7. with opts.Labels, it sets them on the MemberCluster Name on the hub.
//
// Register is idempotent: running it again rotates the token, updates the Secret in place and
// revokes the previous token. If it fails before step 5, nothing has been written to the hub.
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
	c, err := o.clients()
	if err != nil {
		return nil, err
	}

	// 1. Which cluster this is, and whether it may be registered as Name.
	id, err := clusterID(ctx, c.member)
	if err != nil {
		return nil, fmt.Errorf("reading the member's identity (%s): %w", o.memberURL, err)
	}
	if err := o.notTheHub(ctx, c.hub, id); err != nil {
		return nil, err
	}
	members, err := o.registeredMembers(ctx, c.hub)
	if err != nil {
		return nil, err
	}
	if err := o.mayRegister(members, id); err != nil {
		return nil, err
	}

	// 2. to 4. The registration's identity in the member and a verified credential.
	if err := o.applyIdentity(ctx, c.member); err != nil {
		return nil, err
	}
	cred, err := o.issueCredential(ctx, c.member)
	if err != nil {
		return nil, err
	}

	// 5. The Secret on the hub.
	if err := o.applySecret(ctx, c.hub, cred, id); err != nil {
		o.deleteTokenSecret(c.member, cred.tokenSecret)
		return nil, err
	}
	res := &Result{SecretName: o.Name, SecretNamespace: o.SecretNamespace, TokenExpires: cred.expires, Server: o.Server,
		ClusterID: id, ServiceAccount: o.MemberNamespace + "/" + ServiceAccountName(o.Name)}

	// 6. Revoke what the hub no longer uses; 7. the MemberCluster's labels.
	if res.RevokedTokens, err = o.revokePrevious(ctx, c.member, cred.tokenSecret.Name, members, id); err != nil {
		return nil, fmt.Errorf("the hub Secret %s/%s holds the new credential, but the previous ones are not revoked: %w", o.SecretNamespace, o.Name, err)
	}
	if o.Labels != nil {
		if err := o.labelMemberCluster(ctx, c.hub); err != nil {
			return nil, fmt.Errorf("the hub Secret %s/%s holds the new credential, but labelling MemberCluster %s failed: %w", o.SecretNamespace, o.Name, o.Name, err)
		}
	}
	return res, nil
}

// applySecret applies the hub Secret holding the credential.
func (o *options) applySecret(ctx context.Context, hub client.Client, cred *credential, id string) error {
	secret := corev1ac.Secret(o.Name, o.SecretNamespace).
		WithLabels(managedBy()).
		WithLabels(map[string]string{o.SecretLabel: "true"}).
		WithAnnotations(map[string]string{
			TokenExpiresAnnotation: cred.expires.Format(time.RFC3339),
			ClusterIDAnnotation:    id,
		}).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{o.SecretKey: cred.kubeconfig})
	if err := applyInNamespace(ctx, hub, o.SecretNamespace, secret); err != nil {
		return fmt.Errorf("applying Secret %s/%s on the hub (%s): %w", o.SecretNamespace, o.Name, o.Hub.Host, err)
	}
	return nil
}

// Unregister undoes Register. It refuses, and changes nothing, if Name is not a registered member
// (no Secret Name labelled SecretLabel="true" in SecretNamespace: ErrNotRegistered), or if the
// cluster Member reaches is not the one Name is registered for (ErrOtherCluster), or if that one
// is unknown (ErrUnknownCluster: the Secret has no ClusterIDAnnotation and the MemberCluster no
// status.clusterID). The registered cluster is the Secret's ClusterIDAnnotation, else the
// MemberCluster's status.clusterID.
//
// Otherwise, in this order:
//
//  1. it deletes the hub Secret, so that the hub drops the member: it stops reconciling and
//     placing there, and deletes the MemberCluster Name;
//  2. with RemovePlaced, it waits until the hub has let go (the MemberCluster is gone; one that
//     outlives releaseTimeout, when no hub is running, it deletes itself), so that no hub places
//     them again, and then deletes, with Member, the ConfigBundles FleetBundles placed in the
//     member, each with a uid precondition;
//  3. in the member, it deletes the registration's ClusterRoleBinding, ServiceAccount and token
//     Secrets (which revokes every token issued for it), the legacy ServiceAccount and
//     ClusterRoleBinding once no registration on the hub may use them, and the ClusterRole
//     RBACName once no binding refers to it.
//
// Objects already gone are skipped. Namespaces and everything else, such as the ConfigBundles
// and ConfigMaps the hub reconciled (the placed ones too, without RemovePlaced), are left
// untouched. Labels, Force, AllowHubAsMember, Server, SecretKey and TokenDuration are not used.
//
// If the hub Secret cannot be deleted, the member is not touched. If the member cannot be
// reached (nor its identity read), the hub Secret is still deleted, since nothing in any member
// is changed, and the error names what was left behind in the member. Past the hub Secret, a
// failed step does not stop the next ones: the error names what was left behind.
func Unregister(ctx context.Context, opts Options) (*Unregistration, error) {
	o, err := opts.complete(false)
	if err != nil {
		return nil, fmt.Errorf("unregistering member: %w", err)
	}
	res, err := o.unregister(ctx)
	if err != nil {
		return res, fmt.Errorf("unregistering member %q: %w", o.Name, err)
	}
	return res, nil
}

func (o *options) unregister(ctx context.Context) (*Unregistration, error) {
	c, err := o.clients()
	if err != nil {
		return nil, err
	}
	members, err := o.registeredMembers(ctx, c.hub)
	if err != nil {
		return nil, err
	}
	secret, err := o.registeredSecret(members)
	if err != nil {
		return nil, err
	}
	id, idErr := clusterID(ctx, c.member)
	if idErr == nil {
		if err := o.mayUnregister(members, id); err != nil {
			return nil, err
		}
	}

	// 1. The hub forgets the member.
	precondition := client.Preconditions{UID: &secret.UID}
	if err := client.IgnoreNotFound(c.hub.Delete(ctx, secret, precondition)); err != nil {
		return nil, fmt.Errorf("deleting Secret %s/%s on the hub (%s); nothing was deleted in the member: %w", o.SecretNamespace, o.Name, o.Hub.Host, err)
	}
	res := &Unregistration{}
	if idErr != nil {
		return res, o.leftBehind(o.memberObjects(), fmt.Errorf("reading the member's identity: %w", idErr))
	}
	// 2. and 3. What the hub placed, then its access.
	return res, o.cleanUpMember(ctx, c, members, id, res)
}

// leftBehind is the error of an unregistration that deleted the hub Secret but not all of what
// the registration has in the member.
func (o *options) leftBehind(what []string, err error) error {
	return fmt.Errorf("deleted Secret %s/%s on the hub, but could not clean up the member (%s); left behind in the member: %s: %w",
		o.SecretNamespace, o.Name, o.memberURL, strings.Join(what, ", "), err)
}

// clients are uncached clients of the member and the hub.
type clients struct {
	member, hub client.Client
}

func (o *options) clients() (*clients, error) {
	member, err := newClient(o.Member)
	if err != nil {
		return nil, fmt.Errorf("building a client for the member: %w", err)
	}
	hub, err := newClient(o.Hub)
	if err != nil {
		return nil, fmt.Errorf("building a client for the hub: %w", err)
	}
	return &clients{member: member, hub: hub}, nil
}

// scheme knows the kinds Register and Unregister read and write.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(hubv1alpha1.AddToScheme(s))
	return s
}()

// newClient returns an uncached client for cfg, which it copies.
func newClient(cfg *rest.Config) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = FieldOwner
	return client.New(cfg, client.Options{Scheme: scheme})
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
