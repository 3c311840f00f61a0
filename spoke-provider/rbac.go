package spokeprovider

// What the hub's credential needs in a member besides the ConfigBundle reconciler's own rules:
// reading kube-system's uid to recognise a cluster registered twice, and keeping the ConfigBundle
// CRD: watching it (list and watch with the field selector metadata.name, which RBAC matches
// against resourceNames) and installing or restoring it (server-side apply) when --install-crds
// is on.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get,resourceNames=kube-system
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;create;patch,resourceNames=configbundles.configbundle.dev

// And keeping the hub's admission policies and their bindings (Options.InstallGuard), likewise
// by name: created by server-side apply, restored by update. Learning its own identity (a SelfSubjectReview) needs no right of its own.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;patch;update,resourceNames=configbundle-hub-guard;configbundle-hub-takeover
