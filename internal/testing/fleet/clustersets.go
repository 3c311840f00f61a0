package fleet

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
)

// GlobalClusterSet is the ClusterSet that selects every member ({}), which Start creates on a
// hub control plane it starts, as config/samples/clusterset_global.yaml does: BindGlobal binds
// it into a namespace.
const GlobalClusterSet = "global"

// installTenancy installs, on a hub control plane Start started, what config/default ships for
// the tenancy model (the ValidatingAdmissionPolicies configbundle-hub-clusterset-bind and
// configbundle-hub-approval, and their bindings) and the ClusterSet GlobalClusterSet.
func (f *Fleet) installTenancy(ctx context.Context) error {
	policy, binding, err := config.ClusterSetBindPolicy()
	if err != nil {
		return err
	}
	approval, approvalBinding, err := config.ApprovalPolicy()
	if err != nil {
		return err
	}
	set, _, err := config.SampleClusterSet()
	if err != nil {
		return err
	}
	for _, o := range []client.Object{policy, binding, approval, approvalBinding, set} {
		if err := f.Hub.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// NewClusterSet returns a ClusterSet of name selecting the members with labels (nil or empty:
// every member).
func NewClusterSet(name string, labels map[string]string) *hubv1alpha1.ClusterSet {
	return &hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: hubv1alpha1.ClusterSetSpec{ClusterSelector: metav1.LabelSelector{MatchLabels: labels}}}
}

// NewClusterSetBinding returns the binding of the ClusterSet set into namespace ns.
func NewClusterSetBinding(ns, set string) *hubv1alpha1.ClusterSetBinding {
	return &hubv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: set},
		Spec: hubv1alpha1.ClusterSetBindingSpec{ClusterSet: set}}
}

// Bind creates the hub namespace ns if it does not exist and binds the ClusterSet set into it,
// with c (the fleet's hub client, an administrator, if nil); a binding that exists is no error.
func (f *Fleet) Bind(ctx context.Context, c client.Client, ns, set string) error {
	if c == nil {
		c = f.Hub
	}
	if err := EnsureNamespace(ctx, c, ns); err != nil && !apierrors.IsForbidden(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	if err := c.Create(ctx, NewClusterSetBinding(ns, set)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding ClusterSet %s into namespace %s: %w", set, ns, err)
	}
	return nil
}

// BindGlobal binds GlobalClusterSet into the hub namespaces ns (creating those that do not
// exist): their FleetBundles may then place into every member, as before cluster sets.
func (f *Fleet) BindGlobal(ctx context.Context, ns ...string) error {
	for _, n := range ns {
		if err := f.Bind(ctx, nil, n, GlobalClusterSet); err != nil {
			return err
		}
	}
	return nil
}

// BindGlobalWith makes, with c (an administrator of a hub cluster that Start did not start, such
// as a bare control plane with the hub's CRDs), what Start and BindGlobal make: the ClusterSet
// GlobalClusterSet ({}) if it does not exist, and its binding into the namespaces ns (creating
// those that do not exist). The FleetBundles of ns may then place into every member, as before
// cluster sets. It installs no admission policy: c binds as an administrator would.
func BindGlobalWith(ctx context.Context, c client.Client, ns ...string) error {
	set := NewClusterSet(GlobalClusterSet, nil)
	if err := c.Create(ctx, set); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ClusterSet %s: %w", GlobalClusterSet, err)
	}
	for _, n := range ns {
		if err := EnsureNamespace(ctx, c, n); err != nil {
			return fmt.Errorf("creating namespace %s: %w", n, err)
		}
		if err := c.Create(ctx, NewClusterSetBinding(n, GlobalClusterSet)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("binding ClusterSet %s into namespace %s: %w", GlobalClusterSet, n, err)
		}
	}
	return nil
}
