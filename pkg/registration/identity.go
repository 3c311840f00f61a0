package registration

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// clusterID reads the uid of the kube-system namespace: the cluster's identity, whatever
// address or credential reaches it (as the hub sees it).
func clusterID(ctx context.Context, c client.Client) (string, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := c.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("get namespace %s: %w", metav1.NamespaceSystem, err)
	}
	return string(ns.UID), nil
}

// registered is a member registered on the hub: a Secret in the Secret namespace with the
// Secret label set to "true".
type registered struct {
	name string
	uid  types.UID // the Secret's
	// clusterID is the Secret's ClusterIDAnnotation, else the cluster id its MemberCluster
	// reports, else "" (unknown).
	clusterID string
	// recorded says that clusterID is the Secret's annotation: Register wrote the Secret, with a
	// credential of the registration's own ServiceAccount.
	recorded bool
}

// registry is the members registered on the hub, sorted by name.
type registry []registered

// registeredMembers lists the members registered on the hub. Their Secrets are read as metadata
// only: no kubeconfig is read. A hub that does not serve MemberClusters (yet) is fine.
func (o *options) registeredMembers(ctx context.Context, hub client.Client) (registry, error) {
	secrets := &metav1.PartialObjectMetadataList{}
	secrets.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := hub.List(ctx, secrets, client.InNamespace(o.SecretNamespace), client.MatchingLabels{o.SecretLabel: "true"}); err != nil {
		return nil, fmt.Errorf("listing the registered members (Secrets in %s labelled %s=true) on the hub (%s): %w", o.SecretNamespace, o.SecretLabel, o.Hub.Host, err)
	}
	reported := map[string]string{}
	mcs := &hubv1alpha1.MemberClusterList{}
	if err := hub.List(ctx, mcs); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing MemberClusters on the hub (%s): %w", o.Hub.Host, err)
	}
	for _, mc := range mcs.Items {
		if mc.Spec.SecretRef.Namespace == o.SecretNamespace {
			reported[mc.Spec.SecretRef.Name] = mc.Status.ClusterID
		}
	}
	members := make(registry, 0, len(secrets.Items))
	for _, s := range secrets.Items {
		recorded := s.Annotations[ClusterIDAnnotation]
		members = append(members, registered{
			name: s.Name, uid: s.UID,
			clusterID: cmp.Or(recorded, reported[s.Name]), recorded: recorded != "",
		})
	}
	slices.SortFunc(members, func(a, b registered) int { return strings.Compare(a.name, b.name) })
	return members, nil
}

func (r registry) find(name string) *registered {
	for i := range r {
		if r[i].name == name {
			return &r[i]
		}
	}
	return nil
}

// sameCluster names the members, but except, known to be the cluster id.
func (r registry) sameCluster(id, except string) []string {
	var names []string
	for _, m := range r {
		if m.name != except && m.clusterID == id {
			names = append(names, m.name)
		}
	}
	return names
}

// legacyInUse says whether a member other than except may use the legacy ServiceAccount of the
// cluster id: one whose Secret Register did not write (no ClusterIDAnnotation) and that is that
// cluster, or whose cluster is unknown.
func (r registry) legacyInUse(id, except string) bool {
	for _, m := range r {
		if m.name != except && !m.recorded && (m.clusterID == "" || m.clusterID == id) {
			return true
		}
	}
	return false
}

// mayRegister refuses to register Name for the cluster id if another member is that cluster, or
// if Name is registered for another cluster; Force allows both.
func (o *options) mayRegister(members registry, id string) error {
	if o.Force {
		return nil
	}
	if self := members.find(o.Name); self != nil && self.clusterID != "" && self.clusterID != id {
		return fmt.Errorf("refused, nothing was changed: %w: member %q is registered for the cluster with kube-system uid %s, but the member credentials reach the cluster with kube-system uid %s%s. "+
			"To move %q to this cluster, unregister it first (with the credentials of its cluster), or use --force",
			ErrOtherCluster, o.Name, self.clusterID, id, which(members.sameCluster(id, "")), o.Name)
	}
	if others := members.sameCluster(id, o.Name); len(others) > 0 {
		return fmt.Errorf("refused, nothing was changed: %w: this cluster (kube-system uid %s) is already registered as %s; "+
			"the hub manages a cluster once and would report %q as %s. Use --force to register it under a second name all the same",
			ErrDuplicateCluster, id, memberList(others), o.Name, hubv1alpha1.DuplicateClusterReason)
	}
	return nil
}

// notTheHub refuses the cluster id if it is the hub cluster itself, unless AllowHubAsMember. It
// reads the hub's identity the way the member's is read.
func (o *options) notTheHub(ctx context.Context, hub client.Client, id string) error {
	if o.AllowHubAsMember {
		return nil
	}
	hubID, err := clusterID(ctx, hub)
	if err != nil {
		return fmt.Errorf("reading the hub's identity (%s), to check that the member is not the hub cluster itself; nothing was changed: %w", o.Hub.Host, err)
	}
	if hubID != id {
		return nil
	}
	return fmt.Errorf("refused, nothing was changed: %w (both are the cluster with kube-system uid %s; member %s, hub %s). "+
		"Point --member-kubeconfig or --member-context at the member cluster (without them, the member's kubeconfig is $KUBECONFIG's current context, as the hub's is), "+
		"or use --allow-hub-as-member for a hub that manages itself as a member",
		ErrHubAsMember, id, o.memberURL, o.Hub.Host)
}

// registeredSecret returns the Secret of the member Name, or refuses if there is none.
func (o *options) registeredSecret(members registry) (*corev1.Secret, error) {
	self := members.find(o.Name)
	if self == nil {
		known := "no member is registered there"
		if len(members) > 0 {
			known = "registered there: " + memberList(members.names())
		}
		return nil, fmt.Errorf("refused, nothing was changed: %w: there is no Secret %s/%s labelled %s=true on the hub (%s; %s)",
			ErrNotRegistered, o.SecretNamespace, o.Name, o.SecretLabel, o.Hub.Host, known)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.SecretNamespace, Name: o.Name, UID: self.uid}}, nil
}

// mayUnregister refuses to clean up the cluster id for Name unless Name is registered for it.
func (o *options) mayUnregister(members registry, id string) error {
	self := members.find(o.Name)
	switch {
	case self.clusterID == "":
		return fmt.Errorf("refused, nothing was changed: %w: the Secret %s/%s on the hub has no %s annotation (hub register did not write it, or an older version did) "+
			"and no MemberCluster %s reports its status.clusterID, so it cannot be checked that the member credentials reach the cluster it points at. "+
			"To remove the member from the hub all the same: kubectl -n %s delete secret %s; and in its cluster, the ServiceAccount and ClusterRoleBinding that its kubeconfig's token belongs to",
			ErrUnknownCluster, o.SecretNamespace, o.Name, ClusterIDAnnotation, o.Name, o.SecretNamespace, o.Name)
	case self.clusterID != id:
		return fmt.Errorf("refused, nothing was changed: %w: member %q is the cluster with kube-system uid %s, but the member credentials reach the cluster with kube-system uid %s%s. "+
			"Run it with the credentials (--member-kubeconfig, --member-context) of the cluster %q points at",
			ErrOtherCluster, o.Name, self.clusterID, id, which(members.sameCluster(id, "")), o.Name)
	}
	return nil
}

func (r registry) names() []string {
	names := make([]string, 0, len(r))
	for _, m := range r {
		names = append(names, m.name)
	}
	return names
}

// which says which members the cluster the member credentials reach is.
func which(names []string) string {
	if len(names) == 0 {
		return " (not a registered member)"
	}
	return ", which is " + memberList(names)
}

// memberList renders names as `member "a"` or `members "a", "b"`, at most ten of them.
func memberList(names []string) string {
	const most = 10
	quoted := make([]string, 0, min(len(names), most))
	for _, n := range names[:min(len(names), most)] {
		quoted = append(quoted, fmt.Sprintf("%q", n))
	}
	list := strings.Join(quoted, ", ")
	if len(names) > most {
		list += fmt.Sprintf(" and %d more", len(names)-most)
	}
	if len(names) == 1 {
		return "member " + list
	}
	return "members " + list
}
