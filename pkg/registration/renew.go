package registration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/kubeconfig"
)

// RenewalControllerName names the controller that renews the members' credentials.
const RenewalControllerName = "credentials-renewal"

// RenewAfter is the share of a token's life after which the hub renews it: 80%.
const RenewAfter = 0.8

// Retries of a failed renewal, with the controller's exponential back-off between these.
const (
	renewRetryBase = time.Second
	renewRetryMax  = time.Minute
)

// notOwnedRecheck is how soon a replica that does not manage a member looks at its Secret again
// (sharded: the members move between replicas).
const notOwnedRecheck = time.Minute

// RenewAt is when the hub renews a token issued at issued that expires at expires: once
// RenewAfter (80%) of its life has passed.
func RenewAt(issued, expires time.Time) time.Time {
	return issued.Add(time.Duration(float64(expires.Sub(issued)) * RenewAfter))
}

// untilRenewal is how long to wait, at now, for a renewal due at next: 0 if it is due.
func untilRenewal(now, next time.Time) time.Duration {
	return max(next.Sub(now), 0)
}

// Renewal is what the hub knows of the renewal of one member's credential.
type Renewal struct {
	// Next is when the credential is renewed: RenewAt of its token.
	Next time.Time
	// Err is why the last renewal failed; nil once one succeeded. A failed renewal is retried.
	Err error
}

// Owner says whether this hub process manages a member (sharding.Replica.Owns).
type Owner interface {
	Owns(member string) bool
}

// Renewer renews the tokens `hub register` wrote into the members' kubeconfig Secrets on the
// hub: once RenewAfter of a token's life has passed, it requests a new token of the same
// lifetime for the same ServiceAccount, bound to the same token Secret, with the token itself
// (the TokenRequest API, which the registration's Role allows for its own ServiceAccount only),
// and writes it into the Secret (an update with the Secret's resourceVersion: a concurrent
// `hub register` wins, and the renewal decides again from what it wrote). A Secret not labelled
// as Register's (ManagedByLabel) or whose token is not a bound ServiceAccount token is left
// alone.
type Renewer struct {
	hub       client.Client
	key       string
	userAgent string
	owner     Owner
	now       func() time.Time
	mu        sync.Mutex         // guards renewals
	renewal   map[string]Renewal // by member
}

// NewRenewer returns a Renewer of the Secrets hub reads, whose kubeconfig is under key, for the
// members owner manages; its requests to the members carry userAgent.
func NewRenewer(hub client.Client, key, userAgent string, owner Owner) *Renewer {
	return &Renewer{hub: hub, key: key, userAgent: userAgent, owner: owner, now: time.Now, renewal: map[string]Renewal{}}
}

// SetupWithManager builds the renewal controller on mgr, for the Secrets in namespace labelled
// label="true"; it runs where the hub's work runs (elected unless sharded).
func (r *Renewer) SetupWithManager(mgr manager.Manager, namespace, label string, elected bool) error {
	members := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == namespace && o.GetLabels()[label] == "true"
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named(RenewalControllerName).
		For(&corev1.Secret{}, builder.WithPredicates(members)).
		WithOptions(controller.Options{
			NeedLeaderElection: ptr.To(elected),
			RateLimiter:        workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](renewRetryBase, renewRetryMax),
		}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("building the %s controller: %w", RenewalControllerName, err)
	}
	return nil
}

// State returns what the hub knows of the renewal of member's credential, and false if it does
// not renew it.
func (r *Renewer) State(member string) (Renewal, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.renewal[member]
	return s, ok
}

// Reconcile renews the credential of the member whose Secret req names, if it is due, and comes
// back when the next one is.
func (r *Renewer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	member := req.Name
	secret := &corev1.Secret{}
	if err := r.hub.Get(ctx, req.NamespacedName, secret); err != nil {
		r.forget(member)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !r.owner.Owns(member) {
		r.forget(member)
		return reconcile.Result{RequeueAfter: notOwnedRecheck}, nil
	}
	tok, ok := r.renewable(secret)
	if !ok {
		r.forget(member)
		return reconcile.Result{}, nil
	}
	// Not due yet: come back when it is.
	next := RenewAt(tok.issued, tok.expires)
	if wait := untilRenewal(r.now(), next); wait > 0 {
		r.record(member, Renewal{Next: next})
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	// Due: renew; the Secret's update brings the next renewal.
	expires, err := r.renew(ctx, secret, tok)
	if err != nil {
		renewalFailures.WithLabelValues(member).Inc()
		r.record(member, Renewal{Next: next, Err: err})
		return reconcile.Result{}, fmt.Errorf("renewing the credential of member %s: %w", member, err)
	}
	r.record(member, Renewal{Next: RenewAt(expires.Add(-tok.expires.Sub(tok.issued)), expires)})
	ctrl.LoggerFrom(ctx).Info("Renewed member credential", "cluster", member, "expires", expires)
	return reconcile.Result{}, nil
}

// token is a renewable credential: the kubeconfig's REST config and its token's claims.
type token struct {
	config          *rest.Config
	issued, expires time.Time
	serviceAccount  types.NamespacedName
	boundSecret     authenticationv1.BoundObjectReference
}

// renewable returns the credential of a Secret Register wrote, if its token is a ServiceAccount
// token bound to a Secret.
func (r *Renewer) renewable(secret *corev1.Secret) (*token, bool) {
	if secret.Labels[hubv1alpha1.ManagedByLabel] != FieldOwner {
		return nil, false
	}
	cfg, err := kubeconfig.RESTConfig(secret.Data[r.key])
	if err != nil || cfg.BearerToken == "" {
		return nil, false // the provider reports a kubeconfig it refuses
	}
	return parseToken(cfg)
}

// tokenClaims are the claims of a ServiceAccount token the renewal reads. The signature is not
// checked: the member's API server does that.
type tokenClaims struct {
	IssuedAt   int64 `json:"iat"`
	Expires    int64 `json:"exp"`
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
		} `json:"serviceaccount"`
		Secret *struct {
			Name string    `json:"name"`
			UID  types.UID `json:"uid"`
		} `json:"secret"`
	} `json:"kubernetes.io"`
}

// parseToken reads the claims of cfg's bearer token; false if it is not a ServiceAccount token
// bound to a Secret.
func parseToken(cfg *rest.Config) (*token, bool) {
	parts := strings.Split(cfg.BearerToken, ".")
	if len(parts) != 3 {
		return nil, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, false
	}
	var c tokenClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, false
	}
	k := c.Kubernetes
	if c.IssuedAt <= 0 || c.Expires <= c.IssuedAt || k.Namespace == "" || k.ServiceAccount.Name == "" || k.Secret == nil {
		return nil, false
	}
	return &token{
		config: cfg, issued: time.Unix(c.IssuedAt, 0).UTC(), expires: time.Unix(c.Expires, 0).UTC(),
		serviceAccount: types.NamespacedName{Namespace: k.Namespace, Name: k.ServiceAccount.Name},
		boundSecret:    authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: k.Secret.Name, UID: k.Secret.UID},
	}, true
}

// renew requests a new token like tok with tok itself and writes it into secret, as read; it
// returns the new token's expiry.
func (r *Renewer) renew(ctx context.Context, secret *corev1.Secret, tok *token) (time.Time, error) {
	cfg := rest.CopyConfig(tok.config)
	cfg.UserAgent = r.userAgent
	member, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return time.Time{}, fmt.Errorf("building a client for the member: %w", err)
	}
	lifetime := max(tok.expires.Sub(tok.issued), MinTokenDuration)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(lifetime / time.Second)),
		BoundObjectRef:    &tok.boundSecret,
	}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: tok.serviceAccount.Name, Namespace: tok.serviceAccount.Namespace}}
	if err := member.SubResource("token").Create(ctx, sa, tr); err != nil {
		return time.Time{}, fmt.Errorf("requesting a token for ServiceAccount %s: %w", tok.serviceAccount, err)
	}
	kc, err := withToken(secret.Data[r.key], tr.Status.Token)
	if err != nil {
		return time.Time{}, err
	}
	expires := tr.Status.ExpirationTimestamp.UTC()
	updated := secret.DeepCopy()
	updated.Data[r.key] = kc
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[TokenExpiresAnnotation] = expires.Format(time.RFC3339)
	if err := r.hub.Update(ctx, updated, client.FieldOwner(hubv1alpha1.FieldOwner)); err != nil {
		if apierrors.IsConflict(err) {
			return time.Time{}, fmt.Errorf("writing Secret %s/%s: it changed since it was read; deciding again: %w", secret.Namespace, secret.Name, err)
		}
		return time.Time{}, fmt.Errorf("writing Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return expires, nil
}

// withToken returns kubeconfig raw with every user's token replaced by t.
func withToken(raw []byte, t string) ([]byte, error) {
	if t == "" {
		return nil, errors.New("the API server returned no token")
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	for _, u := range kc.AuthInfos {
		u.Token = t
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return b, nil
}

// record keeps a member's renewal state and its metric.
func (r *Renewer) record(member string, s Renewal) {
	r.mu.Lock()
	r.renewal[member] = s
	r.mu.Unlock()
	renewalTime.WithLabelValues(member).Set(float64(s.Next.Unix()))
	failing := 0.0
	if s.Err != nil {
		failing = 1
	}
	renewalFailing.WithLabelValues(member).Set(failing)
}

// forget drops a member whose credential the hub does not renew (any more).
func (r *Renewer) forget(member string) {
	r.mu.Lock()
	delete(r.renewal, member)
	r.mu.Unlock()
	renewalTime.DeleteLabelValues(member)
	renewalFailing.DeleteLabelValues(member)
	renewalFailures.DeleteLabelValues(member)
}
