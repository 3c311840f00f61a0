package v1alpha1

// The admission policies the hub keeps in every member (ValidatingAdmissionPolicies of
// admissionregistration.k8s.io/v1, each with a binding of the same name), installed on join
// and restored whenever they are edited or deleted, as the ConfigBundle CRD is. They work in
// the member's API server itself: while the hub is down or cut off too.
const (
	// GuardPolicyName is the policy (and binding) that refuses UPDATE and DELETE of a ConfigMap
	// labelled configbundle.dev/guard: "true" (a ConfigMap the hub manages for a ConfigBundle
	// whose driftPolicy is Guard), or of a Secret labelled so and configbundle.dev/bundle-secret:
	// "true" (one the hub publishes for a bundle with target Secret), unless the request comes
	// from the hub's own identity in the member, the garbage collector or the namespace
	// controller. Its message names the object and the ConfigBundle, never a value, and says to
	// change the bundle instead.
	GuardPolicyName = "configbundle-hub-guard"

	// TakeOverPolicyName is the policy (and binding) that refuses to create or change a
	// ConfigBundle whose spec.takeOver is not Never unless the requesting user may itself update
	// the ConfigMap (with target Secret, the Secret) of that name in that namespace (the hub's
	// own identity passes): otherwise a user who may only write ConfigBundles could make the hub
	// overwrite any ConfigMap or Secret.
	TakeOverPolicyName = "configbundle-hub-takeover"
)

// GuardedCondition is the condition type of a MemberCluster that says whether the hub's
// admission policies (GuardPolicyName, TakeOverPolicyName) are in place in the member.
const GuardedCondition = "Guarded"

// Reasons of a MemberCluster's Guarded condition.
const (
	// GuardInstalledReason (True): both policies and their bindings are in the member, as the
	// hub keeps them.
	GuardInstalledReason = "GuardInstalled"

	// GuardUnavailableReason (False): the member's API server does not serve
	// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy: nothing refuses a change of a
	// guarded ConfigMap or Secret there, whose ConfigBundles are healed as with driftPolicy Heal.
	GuardUnavailableReason = "GuardUnavailable"

	// GuardFailedReason (False): the member serves ValidatingAdmissionPolicies but the hub could
	// not learn its own identity there, or install or restore its policies (the message says
	// which, and why: usually rights that `hub register` grants).
	GuardFailedReason = "GuardFailed"

	// GuardPendingReason (Unknown): the hub has not connected to the member yet.
	GuardPendingReason = "GuardPending"
)

// GuardRestoredEvent (Normal) is recorded on a MemberCluster when the hub installed one of its
// admission policies or bindings again, after someone deleted or changed it in the member; the
// note says which.
const GuardRestoredEvent = "GuardRestored"
