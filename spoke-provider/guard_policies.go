package spokeprovider

import (
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// GuardExemptUsers are the users, besides the hub's own identity in a member, whose updates and
// deletions of a guarded ConfigMap or Secret the guard policy lets through: the garbage collector
// (which deletes a bundle's ConfigMap or Secret with its bundle) and the namespace controller (which empties a
// namespace being deleted), each as its service account and, for control planes whose
// controllers do not use service-account credentials, as the kube-controller-manager itself.
var GuardExemptUsers = []string{
	"system:serviceaccount:kube-system:generic-garbage-collector",
	"system:serviceaccount:kube-system:namespace-controller",
	"system:kube-controller-manager",
}

// GuardPolicies returns the admission policies the hub keeps in a member where its own identity
// is hubUser, and their bindings (hubv1alpha1.GuardPolicyName, TakeOverPolicyName), with every
// field the member's API server would default set, so that they compare with the member's
// copies as they are.
func GuardPolicies(hubUser string) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	policies := []*admissionregistrationv1.ValidatingAdmissionPolicy{guardPolicy(hubUser), takeOverPolicy(hubUser)}
	bindings := make([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, 0, len(policies))
	for _, p := range policies {
		bindings = append(bindings, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: p.Labels},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        p.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		})
	}
	return policies, bindings
}

// guardLabels mark the objects the hub keeps in a member.
var guardLabels = map[string]string{"app.kubernetes.io/managed-by": "configbundle-hub"}

// guardPolicy refuses UPDATE and DELETE of a ConfigMap labelled GuardLabel "true", or of a Secret
// the hub published so (labelled GuardLabel and SecretLabel "true"), in its old state (removing a
// label is refused too), by anyone but hubUser and GuardExemptUsers. Its message names the object
// and the ConfigBundle that controls it, never a value.
func guardPolicy(hubUser string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	owner := `oldObject.metadata.ownerReferences.filter(r, r.kind == 'ConfigBundle' && has(r.controller) && r.controller)`
	secretLabel := celString(configbundlev1alpha1.SecretLabel)
	return newPolicy(hubv1alpha1.GuardPolicyName, admissionregistrationv1.MatchResources{
		ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{configbundlev1alpha1.GuardLabel: "true"}},
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
			rule("", "v1", "configmaps", admissionregistrationv1.Update, admissionregistrationv1.Delete),
			rule("", "v1", "secrets", admissionregistrationv1.Update, admissionregistrationv1.Delete),
		},
	}, []admissionregistrationv1.MatchCondition{{
		Name: "published-by-the-hub",
		Expression: `request.resource.resource != 'secrets' || has(oldObject.metadata.labels) && ` + secretLabel +
			` in oldObject.metadata.labels && oldObject.metadata.labels[` + secretLabel + `] == 'true'`,
	}}, []admissionregistrationv1.Variable{{
		Name:       "bundle",
		Expression: `has(oldObject.metadata.ownerReferences) && size(` + owner + `) > 0 ? ` + owner + `[0].name : oldObject.metadata.name`,
	}}, admissionregistrationv1.Validation{
		Expression: "request.userInfo.username in " + celList(append([]string{hubUser}, GuardExemptUsers...)),
		MessageExpression: `request.kind.kind + ' ' + oldObject.metadata.namespace + '/' + oldObject.metadata.name + ' is guarded by ConfigBundle ' + ` +
			`variables.bundle + ' (driftPolicy Guard): change the ConfigBundle ' + variables.bundle + ' instead'`,
		Reason: ptr.To(metav1.StatusReasonForbidden),
	})
}

// takeOverPolicy refuses to create or update a ConfigBundle whose spec.takeOver is not Never
// unless the requesting user may update the object of its name in its namespace that it would
// take over (a ConfigMap, or a Secret with target Secret); hubUser is not asked.
func takeOverPolicy(hubUser string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return newPolicy(hubv1alpha1.TakeOverPolicyName, admissionregistrationv1.MatchResources{
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{rule(configbundlev1alpha1.GroupVersion.Group, "*", "configbundles",
			admissionregistrationv1.Create, admissionregistrationv1.Update)},
	}, []admissionregistrationv1.MatchCondition{
		{Name: "takes-over", Expression: `has(object.spec.takeOver) && object.spec.takeOver != 'Never'`},
		{Name: "not-the-hub", Expression: "request.userInfo.username != " + celString(hubUser)},
	}, []admissionregistrationv1.Variable{
		{Name: "secret", Expression: `has(object.spec.target) && object.spec.target == 'Secret'`},
	}, admissionregistrationv1.Validation{
		Expression: `authorizer.group('').resource(variables.secret ? 'secrets' : 'configmaps').namespace(object.metadata.namespace).name(object.metadata.name).check('update').allowed()`,
		MessageExpression: `'ConfigBundle ' + object.metadata.namespace + '/' + object.metadata.name + ': spec.takeOver ' + object.spec.takeOver + ` +
			`' would let the hub take over ' + (variables.secret ? 'Secret ' : 'ConfigMap ') + object.metadata.namespace + '/' + object.metadata.name + ', which ' + request.userInfo.username + ` +
			`' may not update: only a user who may update that ' + (variables.secret ? 'Secret' : 'ConfigMap') + ' may set takeOver other than Never'`,
		Reason: ptr.To(metav1.StatusReasonForbidden),
	})
}

// newPolicy is a policy named name of one validation, with the defaults of the API server set.
func newPolicy(name string, match admissionregistrationv1.MatchResources, conditions []admissionregistrationv1.MatchCondition,
	variables []admissionregistrationv1.Variable, validation admissionregistrationv1.Validation) *admissionregistrationv1.ValidatingAdmissionPolicy {
	match.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	if match.NamespaceSelector == nil {
		match.NamespaceSelector = &metav1.LabelSelector{}
	}
	if match.ObjectSelector == nil {
		match.ObjectSelector = &metav1.LabelSelector{}
	}
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: guardLabels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &match,
			MatchConditions:  conditions,
			Variables:        variables,
			Validations:      []admissionregistrationv1.Validation{validation},
		},
	}
}

// rule matches the operations on a resource of a group, in every namespace.
func rule(group, version, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource},
			Scope: ptr.To(admissionregistrationv1.AllScopes),
		},
	}}
}

// celString is s as a CEL string literal.
func celString(s string) string {
	return strconv.Quote(s)
}

// celList is ss as a CEL list of string literals.
func celList(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = celString(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
