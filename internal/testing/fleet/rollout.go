package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
)

// AddMembers starts more control planes, all at once, and adds them to the fleet as members
// (not to the hub: see Register), after Start: for tests that need members of their own
// options (AuditWrites, say) beside the fleet's. Close stops them with the others.
func (f *Fleet) AddMembers(ctx context.Context, planes ...controlplane.Plane) ([]*Member, error) {
	cps, err := controlplane.Start(ctx, planes...)
	if err != nil {
		return nil, fmt.Errorf("starting members: %w", err)
	}
	f.mu.Lock()
	f.planes = append(f.planes, cps...)
	f.mu.Unlock()
	return f.addMembers(cps)
}

// MessagePolicy is a ValidatingAdmissionPolicy of a member, and its binding, both named Name,
// that refuse (403 Forbidden: the reconciler's CreateFailed or UpdateFailed, retried with
// back-off) every create and update of a ConfigMap in namespace Namespace whose data.message (or
// data[Key]) is Message: a member where one bad value of a FleetBundle's template fails, as a
// real cluster's policy would.
type MessagePolicy struct {
	Name, Namespace, Message string
	// Key is the data key whose value Message is refused; "" is the message's key.
	Key string
}

// key is the data key the policy checks.
func (p MessagePolicy) key() string {
	if p.Key == "" {
		return configbundlev1alpha1.MessageKey
	}
	return p.Key
}

// policyProbeName names the ConfigMap the policy is probed with (server-side dry run: never
// stored).
const policyProbeName = "message-policy-probe"

// Install creates the policy and its binding in the member of c and waits until the member's
// API server enforces it (a dry-run create of a ConfigMap with the message is refused), at most
// timeout.
func (p MessagePolicy) Install(ctx context.Context, c client.Client, timeout time.Duration) error {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
					},
				}},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.data) || !(%q in object.data) || object.data[%q] != %q", p.key(), p.key(), p.Message),
				Message:    fmt.Sprintf("this cluster refuses the %s %q", p.key(), p.Message),
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        p.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: p.Namespace}}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("creating %T %s: %w", obj, p.Name, err)
		}
	}
	return p.waitEnforced(ctx, c, true, timeout)
}

// Remove deletes the policy and its binding and waits until the member's API server no longer
// enforces it, at most timeout.
func (p MessagePolicy) Remove(ctx context.Context, c client.Client, timeout time.Duration) error {
	err := errors.Join(
		client.IgnoreNotFound(c.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: p.Name}})),
		client.IgnoreNotFound(c.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}})))
	if err != nil {
		return fmt.Errorf("deleting ValidatingAdmissionPolicy %s: %w", p.Name, err)
	}
	return p.waitEnforced(ctx, c, false, timeout)
}

// waitEnforced waits until a dry-run create of a ConfigMap with the message is refused (want
// true) or accepted (false).
func (p MessagePolicy) waitEnforced(ctx context.Context, c client.Client, want bool, timeout time.Duration) error {
	var last error
	deadline := time.Now().Add(timeout)
	for {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: policyProbeName},
			Data: map[string]string{p.key(): p.Message}}
		last = c.Create(ctx, cm, client.DryRunAll)
		if refused := apierrors.IsForbidden(last); refused == want && (refused || last == nil) {
			return nil
		}
		if time.Now().After(deadline) {
			what := "accepted"
			if last != nil {
				what = last.Error()
			}
			return fmt.Errorf("policy %s enforced %v: not within %v (last dry-run create: %s)", p.Name, want, timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// BundleWrites returns the writes of ConfigBundle ns/name that the control plane served to the
// hub, successful ones only, in the order they completed, from its audit log
// (controlplane.Options.AuditWrites): with subresource "", the creates, updates and patches of
// the bundle itself (a placement, a change of revision, a heal); with "status", those of its
// status (the member's reconciler reporting it).
func BundleWrites(cp *controlplane.ControlPlane, ns, name, subresource string) ([]controlplane.Write, error) {
	writes, err := cp.Writes()
	if err != nil {
		return nil, err
	}
	var out []controlplane.Write
	for _, w := range writes {
		if w.Resource == "configbundles" && w.Subresource == subresource && w.Namespace == ns && w.Name == name &&
			strings.HasPrefix(w.UserAgent, hubv1alpha1.UserAgentPrefix) && w.Code < 300 && slices.Contains([]string{"create", "update", "patch"}, w.Verb) {
			out = append(out, w)
		}
	}
	return out, nil
}

// WritesSince keeps the writes that completed at or after since.
func WritesSince(writes []controlplane.Write, since time.Time) []controlplane.Write {
	var out []controlplane.Write
	for _, w := range writes {
		if !w.At.Before(since) {
			out = append(out, w)
		}
	}
	return out
}

// Revisions returns the ControllerRevisions of FleetBundle fb (labelled FleetBundleLabel
// "<namespace>.<name>" in its namespace), by .revision.
func Revisions(ctx context.Context, c client.Client, fb *hubv1alpha1.FleetBundle) ([]appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(fb.Namespace), client.MatchingLabels{hubv1alpha1.FleetBundleLabel: fb.Namespace + "." + fb.Name}); err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
	return list.Items, nil
}

// KStatus reads FleetBundle fb as kstatus (sigs.k8s.io/cli-utils: the health check of Flux, kpt
// and Argo CD-style tools) does, from its unstructured form.
func KStatus(ctx context.Context, c client.Client, fb *hubv1alpha1.FleetBundle) (*kstatus.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hubv1alpha1.GroupVersion.WithKind("FleetBundle"))
	if err := c.Get(ctx, client.ObjectKeyFromObject(fb), u); err != nil {
		return nil, err
	}
	return kstatus.Compute(u)
}
