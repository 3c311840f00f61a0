package placement

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// unreachable is a member's cluster whose API server does not answer: the watches' bookkeeping
// needs only its config.
type unreachable struct {
	cluster.Cluster
	config *rest.Config
}

func (u unreachable) GetConfig() *rest.Config { return u.config }

// TestWorkloadWatches: a namespace of a member is watched while a FleetBundle whose rollout
// judges workloads uses it, once for all of them, anew when the member connects anew, and no
// longer once none does (or the manager stops); a FleetBundle that ignores workloads starts no
// watch.
func TestWorkloadWatches(t *testing.T) {
	ws := newWorkloadWatches(func(string, []types.NamespacedName) {})
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	c1 := unreachable{config: &rest.Config{Host: "https://127.0.0.1:1"}}
	c2 := unreachable{config: &rest.Config{Host: "https://127.0.0.1:2"}}
	count := func() int {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		return len(ws.watches)
	}
	use := func(member string, cl cluster.Cluster, fb types.NamespacedName) *namespaceWatch {
		w, err := ws.use(member, cl, fb.Namespace, fb)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	ignore := &hubv1alpha1.FleetBundle{}
	ignore.Namespace, ignore.Name = "ns", "ignore"
	if w := ws.workloadsOf(context.Background(), "m1", c1, ignore); w != nil || count() != 0 {
		t.Fatalf("a FleetBundle without workloads: got %v and %d watches, want none", w, count())
	}
	first := use("m1", c1, a)
	if use("m1", c1, b) != first || count() != 1 {
		t.Fatalf("two FleetBundles of one namespace: %d watches, want 1 shared", count())
	}
	if w := first.consumers(targetOf(ignore)); w.Known {
		t.Errorf("an unreachable member's workloads are Known")
	}
	ws.release("m1", "ns", a)
	if count() != 1 {
		t.Fatalf("released by one of two users: %d watches, want 1", count())
	}
	ws.keepOnly(b, nil)
	if count() != 0 {
		t.Fatalf("released by its last user: %d watches, want 0", count())
	}
	select {
	case <-first.stop:
	default:
		t.Errorf("a watch no one uses is not stopped")
	}
	again := use("m1", c1, a)
	if use("m1", c2, a) == again {
		t.Errorf("a member connected anew keeps its old watch")
	}
	use("m2", c1, a)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ws.Start(ctx); err != nil || count() != 0 {
		t.Errorf("stopped with the manager: %v, %d watches, want 0", err, count())
	}
}
