package v1alpha1

// GuardLabel marks a ConfigMap or Secret that the hub manages for a ConfigBundle whose
// driftPolicy is Guard: the member's ValidatingAdmissionPolicy configbundle-hub-guard refuses its
// UPDATE and DELETE unless the request comes from the hub, the garbage collector or the namespace
// controller (a Secret only when it also carries SecretLabel, as every Secret the hub publishes).
const GuardLabel = "configbundle.dev/guard"
