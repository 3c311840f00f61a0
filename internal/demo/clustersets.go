package demo

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
)

// bindGlobal applies config/samples/clusterset_global.yaml, as a newcomer does before a first
// FleetBundle: the ClusterSet global, which selects every member, and its binding into the
// namespace default. A FleetBundle selects only among the members of the sets bound to its
// namespace: without it the demo's FleetBundles, all in default, would place nothing
// (NoClusterSetBinding).
func (d *demo) bindGlobal(ctx context.Context) error {
	set, binding, err := config.SampleClusterSet()
	if err != nil {
		return err
	}
	d.say("==> Cluster sets: a FleetBundle places only into the members of the ClusterSets bound to its namespace (docs/concepts/security.md); the set %s, every member, bound into %s", set.Name, binding.Namespace)
	d.say("$ kubectl apply -f config/samples/clusterset_global.yaml    # ClusterSet %s (clusterSelector {}: every member) and ClusterSetBinding %s/%s", set.Name, binding.Namespace, binding.Name)
	for _, o := range []client.Object{set, binding} {
		kind := "clusterset"
		if _, ok := o.(*hubv1alpha1.ClusterSetBinding); ok {
			kind = "clustersetbinding"
		}
		verb := "created"
		switch err := d.fl.Hub.Create(ctx, o); {
		case apierrors.IsAlreadyExists(err): // the local fleet's hub has the set already, as an install may
			verb = "unchanged"
		case err != nil:
			return fmt.Errorf("creating %s %s: %w", kind, o.GetName(), err)
		}
		d.say("%s.%s/%s %s", kind, hubv1alpha1.GroupVersion.Group, o.GetName(), verb)
	}
	if err := d.poll(ctx, "the binding to be Ready and the set to select every member", d.boundGlobal(set.Name, binding)); err != nil {
		return err
	}
	d.say("$ kubectl get clustersets; kubectl get clustersetbindings -n %s", binding.Namespace)
	if err := d.table(ctx, "clustersets"); err != nil {
		return err
	}
	return d.table(ctx, "namespaces/"+binding.Namespace+"/clustersetbindings")
}

// boundGlobal is true once the binding is Ready (Bound) and the set counts every member.
func (d *demo) boundGlobal(set string, binding *hubv1alpha1.ClusterSetBinding) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		cs, b := &hubv1alpha1.ClusterSet{}, &hubv1alpha1.ClusterSetBinding{}
		if err := d.fl.Hub.Get(ctx, client.ObjectKey{Name: set}, cs); err != nil {
			return false, nil
		}
		if err := d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(binding), b); err != nil {
			return false, nil
		}
		ready := meta.FindStatusCondition(b.Status.Conditions, hubv1alpha1.ReadyCondition)
		return ready != nil && ready.Status == metav1.ConditionTrue && ready.Reason == hubv1alpha1.ClusterSetBoundReason &&
			int(cs.Status.Clusters) == len(d.members), nil
	}
}
