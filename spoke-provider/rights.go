package spokeprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// RulesReviewNamespace is the namespace of the SelfSubjectRulesReview by which the provider
// checks a member credential's Options.Rights. A SelfSubjectRulesReview lists the rules of the
// ClusterRoleBindings and those of the RoleBindings of its namespace, and the API server does not
// require that namespace to exist. The hub's rights must be cluster-wide (it watches every
// namespace), so it asks about a namespace no cluster is expected to have: there only
// ClusterRoleBindings answer, and a Role bound in one namespace never passes for a cluster-wide
// right.
const RulesReviewNamespace = "configbundle-hub-rules-review"

// RightsOf expands RBAC rules into the rights they grant, one verb on one resource (and
// subresource, "configbundles/status"), or on one object of it by name, cluster-wide: what
// Options.Rights lists. Non-resource rules grant no right of that kind and are skipped.
func RightsOf(rules []rbacv1.PolicyRule) []authorizationv1.ResourceAttributes {
	var rights []authorizationv1.ResourceAttributes
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, group := range r.APIGroups {
			for _, res := range r.Resources {
				resource, subresource, _ := strings.Cut(res, "/")
				for _, verb := range r.Verbs {
					for _, name := range names {
						rights = append(rights, authorizationv1.ResourceAttributes{
							Verb: verb, Group: group, Resource: resource, Subresource: subresource, Name: name,
						})
					}
				}
			}
		}
	}
	return rights
}

// uncovered returns the rights that no rule grants, in their order, by RBAC's matching: "*"
// matches any verb, API group or resource (subresources included), "*/status" any resource's
// status, and a rule that names objects (resourceNames) grants a right only on one of them: never
// a right on every object of the resource.
func uncovered(rules []authorizationv1.ResourceRule, rights []authorizationv1.ResourceAttributes) []authorizationv1.ResourceAttributes {
	var out []authorizationv1.ResourceAttributes
	for _, right := range rights {
		if !slices.ContainsFunc(rules, func(rule authorizationv1.ResourceRule) bool { return grants(rule, right) }) {
			out = append(out, right)
		}
	}
	return out
}

// grants reports whether rule grants right.
func grants(rule authorizationv1.ResourceRule, right authorizationv1.ResourceAttributes) bool {
	if !matches(rule.Verbs, right.Verb) || !matches(rule.APIGroups, right.Group) {
		return false
	}
	resource := right.Resource
	if right.Subresource != "" {
		resource += "/" + right.Subresource
	}
	if !matches(rule.Resources, resource) && (right.Subresource == "" || !slices.Contains(rule.Resources, "*/"+right.Subresource)) {
		return false
	}
	return len(rule.ResourceNames) == 0 || right.Name != "" && slices.Contains(rule.ResourceNames, right.Name)
}

// matches reports whether values holds value or "*".
func matches(values []string, value string) bool {
	return slices.Contains(values, value) || slices.Contains(values, "*")
}

// describeRight names a right as kubectl auth can-i would: "update configmaps",
// "update configbundles.configbundle.dev/status", "get namespaces named kube-system".
func describeRight(r authorizationv1.ResourceAttributes) string {
	s := r.Verb + " " + r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	if r.Name != "" {
		s += " named " + r.Name
	}
	return s
}

// missingRightsError says which rights the member refuses the hub's credential.
func missingRightsError(missing []authorizationv1.ResourceAttributes) error {
	names := make([]string, len(missing))
	for i, r := range missing {
		names[i] = describeRight(r)
	}
	return &connectError{reason: hubv1alpha1.ForbiddenReason, err: fmt.Errorf(
		"the hub's credential may not %s (its RBAC in the member lost them: register the member again to restore its ClusterRoleBinding)",
		strings.Join(names, ", "))}
}

// checkRights makes sure the member allows the hub's credential every one of Options.Rights: one
// SelfSubjectRulesReview, which every authenticated user may create; and only if the review says
// it is incomplete (an authorizer other than RBAC, such as a webhook, cannot list its rules) and
// some right is not among its rules, one SelfSubjectAccessReview for each such right. It returns
// a Forbidden connectError naming the rights refused, or the error of a request that failed.
func (p *Provider) checkRights(ctx context.Context, conn *connection) error {
	if len(p.opts.Rights) == 0 {
		return nil
	}
	review := &authorizationv1.SelfSubjectRulesReview{
		TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1.SchemeGroupVersion.String(), Kind: "SelfSubjectRulesReview"},
		Spec:     authorizationv1.SelfSubjectRulesReviewSpec{Namespace: RulesReviewNamespace},
	}
	if err := conn.create(ctx, "selfsubjectrulesreviews", review); err != nil {
		return requestError("reviewing the credential's rights", err, conn.expiry)
	}
	missing := uncovered(review.Status.ResourceRules, p.opts.Rights)
	if len(missing) > 0 && (review.Status.Incomplete || review.Status.EvaluationError != "") {
		var err error
		if missing, err = conn.refusedRights(ctx, missing); err != nil {
			return requestError("reviewing the credential's rights", err, conn.expiry)
		}
	}
	if len(missing) > 0 {
		return missingRightsError(missing)
	}
	return nil
}

// refusedRights asks the member about each of rights (SelfSubjectAccessReview, cluster-wide)
// and returns those it does not allow.
func (c *connection) refusedRights(ctx context.Context, rights []authorizationv1.ResourceAttributes) ([]authorizationv1.ResourceAttributes, error) {
	var refused []authorizationv1.ResourceAttributes
	for _, r := range rights {
		review := &authorizationv1.SelfSubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: authorizationv1.SchemeGroupVersion.String(), Kind: "SelfSubjectAccessReview"},
			Spec:     authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &r},
		}
		if err := c.create(ctx, "selfsubjectaccessreviews", review); err != nil {
			return nil, err
		}
		if !review.Status.Allowed {
			refused = append(refused, r)
		}
	}
	return refused, nil
}

// create creates a review of the authorization API (resource: its plural) and reads the
// answer into it, through the connection's discovery client: no client of its own, and so no
// connection of its own either.
func (c *connection) create(ctx context.Context, resource string, review any) error {
	return c.createIn(ctx, authorizationv1.GroupName, resource, review)
}

// createIn creates a review of the API group's v1 (authorization, authentication) and reads
// the answer into it, as create does.
func (c *connection) createIn(ctx context.Context, group, resource string, review any) error {
	body, err := json.Marshal(review)
	if err != nil {
		return err
	}
	raw, err := c.discovery.Post().AbsPath("/apis", group, "v1", resource).
		SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, review); err != nil {
		return fmt.Errorf("decoding the %s answer: %w", resource, err)
	}
	return nil
}
