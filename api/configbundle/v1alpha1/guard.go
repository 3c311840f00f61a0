package v1alpha1

// GuardLabel marks a ConfigMap that the hub manages for a ConfigBundle whose driftPolicy is
// Guard: the member's ValidatingAdmissionPolicy configbundle-hub-guard refuses its UPDATE and
// DELETE unless the request comes from the hub, the garbage collector or the namespace controller.
const GuardLabel = "configbundle.dev/guard"
