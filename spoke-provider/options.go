package spokeprovider

import (
	"cmp"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/sharding"
)

// Defaults of Options.
const (
	DefaultProbeInterval    = 10 * time.Second
	DefaultProbeTimeout     = 3 * time.Second
	DefaultFailureThreshold = 2
	DefaultConnectTimeout   = 30 * time.Second
	DefaultRetryMaxDelay    = time.Minute
	DefaultQPS              = 50
	DefaultBurst            = 100
	DefaultRequestTimeout   = 10 * time.Second

	// DefaultMaxConcurrentReconciles is the default of Options.MaxConcurrentReconciles.
	DefaultMaxConcurrentReconciles = 4

	// retryBaseDelay is the first delay before a failed connection is tried again.
	retryBaseDelay = 2 * time.Second
)

// Options configure the Provider. The zero value of a field means its default, which its
// comment gives.
type Options struct {
	// Namespace is the hub namespace holding the kubeconfig Secrets. Defaults to
	// hubv1alpha1.DefaultSecretNamespace.
	Namespace string

	// Label is the label that makes a Secret a member, with the value "true". Defaults to
	// hubv1alpha1.DefaultSecretLabel, the convention of multicluster-runtime's kubeconfig provider.
	Label string

	// Key is the Secret data key holding the kubeconfig. Defaults to
	// hubv1alpha1.DefaultSecretKey.
	Key string

	// ProbeInterval is how often each member is probed. Defaults to DefaultProbeInterval (10
	// seconds).
	ProbeInterval time.Duration

	// ProbeTimeout bounds one probe. Defaults to DefaultProbeTimeout (3 seconds), or
	// ProbeInterval if that is shorter.
	ProbeTimeout time.Duration

	// FailureThreshold is the number of consecutive failed probes after which a member is
	// Unreachable. Defaults to DefaultFailureThreshold (2).
	FailureThreshold int

	// ConnectTimeout bounds a connection attempt: reaching the member, checking its identity,
	// installing CRDs and warming the caches. Defaults to DefaultConnectTimeout (30 seconds).
	ConnectTimeout time.Duration

	// RetryMaxDelay caps the delay before a failed connection is tried again (it starts at 2
	// seconds and doubles). Defaults to DefaultRetryMaxDelay (1 minute).
	RetryMaxDelay time.Duration

	// QPS and Burst limit each member client (a bundle costs two writes). Default to DefaultQPS
	// (50) and DefaultBurst (100).
	QPS   float32
	Burst int

	// RequestTimeout bounds each request of a member client other than watches. Defaults to
	// DefaultRequestTimeout (10 seconds).
	RequestTimeout time.Duration

	// CRDs are the CRDs a member must serve. Each connection watches them in its member (one
	// watch per CRD, by name): a CRD deleted there makes the member not Ready (CRDMissing) at
	// once, until it is served again; one that differs from its entry here, or that the hub may
	// not watch, is said in the member's Ready message (see InstallCRDs). Defaults to none.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// InstallCRDs applies CRDs to each member (server-side apply, forced, as FieldOwner,
	// stamped with hubv1alpha1.MemberCRDRevision): on join where the member has none, or an
	// older revision, and again whenever a member's copy differs from the hub's in the fields it
	// applies (a CRDRestored Event on its MemberCluster), is older or is gone. A copy of a higher
	// revision, which a newer hub applied, is left alone (CRDNewer, the member still Ready).
	// Every write goes through Replica.Fence and carries the resourceVersion of the copy it
	// replaces, but the create of a CRD the member does not have while joining, which never
	// replaces one. Where that is forbidden and a CRD is absent, the member is not Ready
	// (CRDMissing). Defaults to false.
	InstallCRDs bool

	// InstallGuard keeps the hub's admission policies in each member (GuardPolicies: the
	// ValidatingAdmissionPolicies hubv1alpha1.GuardPolicyName and TakeOverPolicyName, and their
	// bindings), as InstallCRDs keeps the CRDs: the hub learns its own identity in the member on
	// join (a SelfSubjectReview), watches them, and applies them (server-side apply, forced, as
	// FieldOwner, through Replica.Fence) whenever one is missing or differs (a GuardRestored
	// Event on its MemberCluster). State.Guard says whether they are in place; a member that
	// does not serve them is GuardUnavailable. Defaults to false.
	InstallGuard bool

	// Rights are what the member must allow the credential, cluster-wide (RightsOf turns a
	// ClusterRole's rules into them). They are checked when connecting and by every probe, with
	// one SelfSubjectRulesReview (see RulesReviewNamespace) and, only where the review is
	// incomplete, one SelfSubjectAccessReview per right it does not list; a member that refuses
	// one is not Ready (ForbiddenReason), its message naming each right refused, until a probe
	// finds them all allowed again. Defaults to none: nothing is checked.
	Rights []authorizationv1.ResourceAttributes

	// WarmTypes are the kinds whose informers are started and synced before a member is
	// engaged, so that no reconcile waits for a cold cache. Defaults to none.
	WarmTypes []client.Object

	// ClusterOptions configure each member's cluster.Cluster (scheme, cache options).
	ClusterOptions []cluster.Option

	// FieldOwner is the field manager of the CRDs the provider applies. Defaults to
	// hubv1alpha1.FieldOwner.
	FieldOwner string

	// Replica is this hub replica. A sharded one (sharding.New) shards the members between hub
	// replicas: the provider connects to, probes and engages only the members it owns
	// (Replica.Owns), lets go of a member as soon as it does not (see Rebalance), and runs on
	// every replica, leader election or not. Every write the clients of an engaged member send
	// (create, update, patch, delete; reads are not fenced) then goes through Replica.Fence,
	// whose error refuses the write, which fails with that error: a replica whose member's
	// Lease may have lapsed (paused, cut off) does not write to a member another replica has
	// taken over, and a replica handing a member over releases its Lease only after its last
	// write. So do the CRD writes (InstallCRDs), but for the create of a missing CRD while
	// joining, before the replica may hold the member's fence. Defaults to the zero Replica:
	// not sharded, every member, no fence.
	Replica sharding.Replica

	// MaxConcurrentReconciles is the number of workers of the kubeconfig-Secret controller.
	// Defaults to DefaultMaxConcurrentReconciles (4).
	MaxConcurrentReconciles int
}

// defaults applies the defaults of Options: the one place they are applied.
func (o *Options) defaults() {
	o.Namespace = cmp.Or(o.Namespace, hubv1alpha1.DefaultSecretNamespace)
	o.Label = cmp.Or(o.Label, hubv1alpha1.DefaultSecretLabel)
	o.Key = cmp.Or(o.Key, hubv1alpha1.DefaultSecretKey)
	o.ProbeInterval = cmp.Or(o.ProbeInterval, DefaultProbeInterval)
	o.ProbeTimeout = cmp.Or(o.ProbeTimeout, min(DefaultProbeTimeout, o.ProbeInterval))
	o.FailureThreshold = cmp.Or(o.FailureThreshold, DefaultFailureThreshold)
	o.ConnectTimeout = cmp.Or(o.ConnectTimeout, DefaultConnectTimeout)
	o.RetryMaxDelay = cmp.Or(o.RetryMaxDelay, DefaultRetryMaxDelay)
	o.QPS = cmp.Or(o.QPS, DefaultQPS)
	o.Burst = cmp.Or(o.Burst, DefaultBurst)
	o.RequestTimeout = cmp.Or(o.RequestTimeout, DefaultRequestTimeout)
	o.FieldOwner = cmp.Or(o.FieldOwner, hubv1alpha1.FieldOwner)
	o.MaxConcurrentReconciles = cmp.Or(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)
}
