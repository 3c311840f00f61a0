package coordinator

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/sharding/sharder"
)

// Bounds of the tests, generous for a loaded two-core machine.
const (
	startTimeout = 3 * time.Minute
	// timeout bounds an Eventually: a few fence requests and decisions.
	timeout = 20 * time.Second
	// interval is the polling interval of Eventually.
	interval = 20 * time.Millisecond
	// holdFor is how long a test checks that something does not happen (Consistently).
	holdFor = 500 * time.Millisecond
)

var (
	// hub is the API server of the Leases, shared by the tests, each in a namespace of its own.
	hub *controlplane.ControlPlane
	// kube is a client of hub, without a cache.
	kube   client.Client
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunOne(m, controlplane.Options{StartTimeout: startTimeout}, func(cp *controlplane.ControlPlane) error {
		hub = cp
		if err := clientgoscheme.AddToScheme(scheme); err != nil {
			return err
		}
		var err error
		kube, err = client.New(cp.Config, client.Options{Scheme: scheme})
		return err
	}))
}

// newNamespace creates a namespace named for the test and returns its name.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if err := kube.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// getLease returns the Lease ns/name.
func getLease(ctx context.Context, ns, name string) (*coordinationv1.Lease, error) {
	ls := &coordinationv1.Lease{}
	return ls, kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ls)
}

// stubSharder owns every cluster while own is set.
type stubSharder struct{ own atomic.Bool }

func (s *stubSharder) ShouldOwn(string, []sharder.PeerInfo, sharder.PeerInfo) bool {
	return s.own.Load()
}

// stubRegistry is a peer registry alone with itself (unless told that others may be live: not
// alone), valid in epoch until told otherwise, its view stable since stable (an hour before it
// was made, unless told otherwise); dead are the peers it judges dead.
type stubRegistry struct {
	self sharder.PeerInfo

	mu     sync.Mutex
	epoch  uint64
	valid  bool
	stable time.Time
	// notAlone: others may be live (Alone is false).
	notAlone bool
	dead     map[string]bool
}

func newStubRegistry(id string) *stubRegistry {
	return &stubRegistry{self: sharder.PeerInfo{ID: id, Weight: 1}, epoch: 1, valid: true, stable: time.Now().Add(-time.Hour), dead: map[string]bool{}}
}

func (r *stubRegistry) Self() sharder.PeerInfo       { return r.self }
func (r *stubRegistry) Snapshot() []sharder.PeerInfo { return []sharder.PeerInfo{r.self} }
func (r *stubRegistry) RefreshSoon()                 {}

func (r *stubRegistry) Run(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func (r *stubRegistry) Validity() (uint64, time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch, time.Now().Add(time.Minute), r.valid
}

func (r *stubRegistry) Alone(time.Time) (alone, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.notAlone, true
}

func (r *stubRegistry) Stable() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stable
}

func (r *stubRegistry) Dead(id string, _ time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dead[id]
}

// newEpoch voids every fence taken before, as the registry does when this peer may have been
// judged dead.
func (r *stubRegistry) newEpoch() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
}

// engagedAware records the clusters it is engaged with, and the context of each engagement.
type engagedAware struct {
	mu      sync.Mutex
	engaged map[multicluster.ClusterName][]context.Context
}

func newEngagedAware() *engagedAware {
	return &engagedAware{engaged: map[multicluster.ClusterName][]context.Context{}}
}

func (a *engagedAware) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.engaged[name] = append(a.engaged[name], ctx)
	return nil
}

// engagements returns the contexts of the cluster's engagements so far.
func (a *engagedAware) engagements(name multicluster.ClusterName) []context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]context.Context(nil), a.engaged[name]...)
}
