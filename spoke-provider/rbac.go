package spokeprovider

// What the hub's credential needs in a member besides the ConfigBundle reconciler's own rules:
// reading kube-system's uid to recognise a cluster registered twice, and keeping the ConfigBundle
// CRD: watching it (list and watch with the field selector metadata.name, which RBAC matches
// against resourceNames) and installing or restoring it (server-side apply) when --install-crds
// is on.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get,resourceNames=kube-system
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;create;patch,resourceNames=configbundles.configbundle.dev
