package v1alpha1

// The contract the hub shares with whoever registers members (`hub register`, a GitOps
// pipeline writing Secrets by hand) and with its own deployment. Every package that needs one of
// these names imports it from here; none declares its own.
const (
	// DefaultSecretNamespace is the hub namespace that holds the members' kubeconfig Secrets,
	// the hub's leader-election Lease, and (by default) the hub's ServiceAccount in a member.
	DefaultSecretNamespace = "configbundle-system"

	// DefaultSecretLabel is the label, with the value "true", that makes a Secret in the
	// Secret namespace a member: the convention of multicluster-runtime's kubeconfig provider.
	DefaultSecretLabel = "sigs.k8s.io/multicluster-runtime-kubeconfig"

	// DefaultSecretKey is the key of a member Secret's data that holds its kubeconfig.
	DefaultSecretKey = "kubeconfig"

	// HubName names the hub wherever the API servers see it: the field manager of its writes,
	// the reporting controller of its Events, its user agent and its leader-election Lease.
	HubName = "configbundle-hub"

	// FieldOwner is the server-side field manager of every write of the hub, on the hub and in
	// the members.
	FieldOwner = HubName

	// UserAgentPrefix begins the user agent of every client of the hub, of the hub cluster and
	// of the members: UserAgentPrefix + "<version> (<replica-id>)", such as
	// "configbundle-hub/v0.3.0 (hub-7d9f-abc)" (version.UserAgent), so that an audit log says
	// which build and which replica wrote. Match the hub's requests by this prefix.
	UserAgentPrefix = HubName + "/"

	// LeaderElectionID names the Lease, in the Secret namespace, that elects the active hub
	// among replicas run with --leader-elect, and the replica that does the hub-wide work (the
	// Fleet roll-up, FleetBundle status) among replicas run with --sharded.
	LeaderElectionID = HubName

	// PeerLeasePrefix prefixes the Lease, in the Secret namespace, by which each replica run
	// with --sharded announces itself: PeerLeasePrefix + "-" + its --replica-id. The members are
	// shared between the replicas whose peer Lease is valid (rendezvous hashing).
	PeerLeasePrefix = HubName + "-peer"

	// MemberLeasePrefix prefixes the Lease, in the Secret namespace, that fences one member
	// between replicas run with --sharded: MemberLeasePrefix + "-" + the member's name, held by
	// the --replica-id of the one replica that reconciles the member.
	MemberLeasePrefix = HubName + "-member"

	// ManagedByLabel is the well-known label the hub sets on what it creates
	// (app.kubernetes.io/managed-by), with the value FieldOwner.
	ManagedByLabel = "app.kubernetes.io/managed-by"

	// ClusterIDAnnotation on a member's kubeconfig Secret records the uid of the member's
	// kube-system namespace (the cluster's identity, as MemberCluster status.clusterID) when the
	// Secret was written by `hub register`, so that the same cluster is not registered twice
	// under two names and `hub unregister` cleans up only the cluster the Secret points at.
	ClusterIDAnnotation = "hub.configbundle.dev/cluster-id"
)
