package hubmanager

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// ErrNoHubCRDs is wrapped by the error of CheckCRDs when the cluster does not serve the hub's
// kinds: its text is the advice.
var ErrNoHubCRDs = errors.New("is this the hub cluster? apply config/crd")

// hubKinds are the kinds the hub and `hub status` read on the hub cluster.
var hubKinds = []string{"MemberCluster", "Fleet", "FleetBundle", "ClusterSet", "ClusterSetBinding"}

// CheckCRDs asks the API server behind mapper (a discovery-backed RESTMapper, such as a
// manager's or a client's) whether it serves every kind of hub.configbundle.dev/v1alpha1 the
// hub reads. If some are missing (a member's kubeconfig given for the hub's, or the CRDs not
// applied yet) it returns an error naming them and wrapping ErrNoHubCRDs, instead of the
// "no matches for kind" the first read would fail with; any other discovery error is returned
// as it is.
func CheckCRDs(mapper meta.RESTMapper) error {
	var missing []string
	for _, kind := range hubKinds {
		gk := schema.GroupKind{Group: hubv1alpha1.GroupVersion.Group, Kind: kind}
		_, err := mapper.RESTMapping(gk, hubv1alpha1.GroupVersion.Version)
		switch {
		case meta.IsNoMatchError(err):
			missing = append(missing, kind)
		case err != nil:
			return fmt.Errorf("discovering the hub's API %s: %w", hubv1alpha1.GroupVersion, err)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the cluster serves no %s (%s): %w", strings.Join(missing, ", "), hubv1alpha1.GroupVersion, ErrNoHubCRDs)
	}
	return nil
}
