package configbundle

import "sigs.k8s.io/multicluster-runtime/pkg/multicluster"

// Remembered returns the number of bundles of member name the reconciler remembers anything of.
func (r *Reconciler) Remembered(name multicluster.ClusterName) int {
	return r.ledger.size(name)
}
