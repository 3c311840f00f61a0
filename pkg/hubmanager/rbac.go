package hubmanager

// What the hub needs in its own namespace of the hub cluster, besides the cluster-scoped rules
// of its health reports (pkg/fleet): reading the members' kubeconfig Secrets, and updating them
// (never creating or deleting one) to renew the tokens `hub register` wrote in them; and
// leader election: the Lease configbundle-hub and the Event that announces a new leader
// (controller-runtime records it through the core Events API today and means to move to
// events.k8s.io, so both are granted). `make manifests` renders these into the Role
// configbundle-hub in config/rbac/hub. The namespace is the default of --secret-namespace: a hub
// run in another namespace needs the Role moved with it, as kustomize's namespace: does for an
// overlay of config/default.
// +kubebuilder:rbac:groups="",namespace=configbundle-system,resources=secrets,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=configbundle-system,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",namespace=configbundle-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=configbundle-system,resources=events,verbs=create;patch

// What the metrics endpoint's authentication and authorization need (--metrics-secure, the
// default): asking the hub cluster's API server who a scraper is and whether it may get
// /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// What FleetBundle placement (pkg/placement) needs on the hub cluster, in every namespace: reading
// FleetBundles and patching them to add and remove the finalizer hub.configbundle.dev/placement
// (a JSON merge patch of metadata.finalizers alone: the hub never writes a spec it does not own),
// and writing their status. Its Events on FleetBundles use the events.k8s.io rule of the health
// reports (pkg/fleet).
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=fleetbundles,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=fleetbundles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hub.configbundle.dev,resources=fleetbundles/finalizers,verbs=update
//
// A FleetBundle's revisions are ControllerRevisions in its namespace, which the hub creates,
// reads (its cache holds only those labelled hub.configbundle.dev/fleet-bundle) and prunes.
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;delete
//
// A FleetBundle's spec.dataFrom sources are ConfigMaps of its namespace. RBAC cannot grant by
// label, so the rule covers every ConfigMap; the hub's cache lists and watches, and the hub reads,
// only those labelled hub.configbundle.dev/source=true (rollout.SourceCacheOptions). It never
// writes one.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
//
// Its secretRef sources are Secrets of its namespace, read in the same way: the hub's cache lists
// and watches only the Secrets labelled hub.configbundle.dev/source=true, besides the members'
// kubeconfig Secrets of its own namespace and the snapshots it creates
// ("<fleetbundle>-<revision>-sources", labelled hub.configbundle.dev/source=snapshot, owned by
// their ControllerRevision, which the garbage collector deletes with it)
// (rollout.SecretCacheOptions). It never writes a source.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create
