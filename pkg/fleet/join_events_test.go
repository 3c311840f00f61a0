package fleet_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// eventsOf polls the Events on the MemberCluster of uid (not those of an earlier MemberCluster
// of the same name), as "Type Reason" strings.
func eventsOf(uid types.UID) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(hub.List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "MemberCluster" && e.Regarding.UID == uid {
				out = append(out, e.Type+" "+e.Reason)
			}
		}
		return out
	}
}

// TestJoinRaisesNoWarningEvent: the routine steps of a join (connecting, a credential whose
// expiry is not known) are Normal Events on the MemberCluster; a join raises no Warning.
func TestJoinRaisesNoWarningEvent(t *testing.T) {
	g := NewWithT(t)
	state := connected(memberA, 0) // no expiry known
	connecting := state
	connecting.Ready, connecting.Reason, connecting.Message = false, hubv1alpha1.ConnectingReason, "Connecting"
	join(t, memberA, connecting)
	g.Eventually(memberStatus(memberA)).WithTimeout(timeout).WithPolling(interval).Should(
		HaveField("Conditions", haveCondition(hubv1alpha1.ReadyCondition, metav1.ConditionFalse, hubv1alpha1.ConnectingReason)))
	events := eventsOf(memberCluster(memberA)(g).UID)
	members.Set(memberA, state)
	g.Eventually(events).WithTimeout(timeout).WithPolling(interval).Should(ContainElements(
		"Normal "+hubv1alpha1.ConnectingReason, "Normal "+hubv1alpha1.ConnectedReason))
	g.Consistently(events).WithTimeout(2*time.Second).WithPolling(interval).ShouldNot(
		ContainElement(HavePrefix("Warning ")), "a join raises no Warning")
	t.Logf("join Events: %v", events(g))
}
