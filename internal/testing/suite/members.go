package suite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	clustersprovider "sigs.k8s.io/multicluster-runtime/providers/clusters"

	spokeprovider "configbundle.dev/hub/spoke-provider"
)

// Members is what the hub's controllers learn of the members from *spokeprovider.Provider,
// played by a test over multicluster-runtime's clusters provider: its State is the one the test
// last set, and it is connected once the manager has engaged it with every controller. Add it
// to the manager after the controllers (mcmanager.Manager.Add), so that it is engaged last: as
// the provider does when a member joins, Engage then tells the OnChange callbacks, and the
// OnReady ones if the member is Ready. It implements placement.Members and fleet.Members, and
// owns every member (no sharding).
type Members struct {
	clusters *clustersprovider.Provider

	// mu guards the fields below; it is never held while a callback runs.
	mu                sync.Mutex
	states            map[string]spokeprovider.State
	engaged           map[string]bool
	onChange, onReady []func(name string)
}

var _ mcmanager.Runnable = &Members{}

// NewMembers returns Members over the clusters of clusters, none of them known yet.
func NewMembers(clusters *clustersprovider.Provider) *Members {
	return &Members{clusters: clusters, states: map[string]spokeprovider.State{}, engaged: map[string]bool{}}
}

// Start does nothing until ctx ends: Members is a runnable only to be engaged.
func (m *Members) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Engage marks a member engaged until ctx ends and, if its State is known, tells the callbacks
// as Set does.
func (m *Members) Engage(ctx context.Context, name multicluster.ClusterName, _ cluster.Cluster) error {
	m.mu.Lock()
	m.engaged[string(name)] = true
	s, known := m.states[string(name)]
	m.mu.Unlock()
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.engaged, string(name))
	})
	if known {
		m.Set(string(name), s)
	}
	return nil
}

// WaitEngaged waits until every member of names is engaged, or ctx ends.
func (m *Members) WaitEngaged(ctx context.Context, names ...string) error {
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for {
		m.mu.Lock()
		var missing []string
		for _, n := range names {
			if !m.engaged[n] {
				missing = append(missing, n)
			}
		}
		m.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("members %v not engaged: %w", missing, ctx.Err())
		case <-ticker.C:
		}
	}
}

// Set makes s the State of a member and tells the OnChange callbacks, and the OnReady ones if
// s is Ready, as the provider does when a probe or a connection changes what it knows.
func (m *Members) Set(name string, s spokeprovider.State) {
	m.mu.Lock()
	m.states[name] = s
	onChange, onReady := m.onChange, m.onReady
	m.mu.Unlock()
	for _, fn := range onChange {
		fn(name)
	}
	if s.Ready {
		for _, fn := range onReady {
			fn(name)
		}
	}
}

// Forget makes a member unknown, as when its Secret goes, and tells the OnChange callbacks.
func (m *Members) Forget(name string) {
	m.mu.Lock()
	delete(m.states, name)
	onChange := m.onChange
	m.mu.Unlock()
	for _, fn := range onChange {
		fn(name)
	}
}

// Connected returns nil if the member is engaged and Ready, an error wrapping
// spokeprovider.ErrNotConnected if it is engaged but not Ready, and one wrapping
// multicluster.ErrClusterNotFound if it is not engaged.
func (m *Members) Connected(name multicluster.ClusterName) error {
	m.mu.Lock()
	engaged, s := m.engaged[string(name)], m.states[string(name)]
	m.mu.Unlock()
	switch {
	case !engaged:
		return fmt.Errorf("member %q: %w", name, multicluster.ErrClusterNotFound)
	case !s.Ready:
		return fmt.Errorf("member %q is %s: %w", name, s.Reason, spokeprovider.ErrNotConnected)
	}
	return nil
}

// State returns the State last Set for a member, and false if it is unknown.
func (m *Members) State(name string) (spokeprovider.State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.states[name]
	return s, ok
}

// Get returns the cluster of an engaged member.
func (m *Members) Get(ctx context.Context, name multicluster.ClusterName) (cluster.Cluster, error) {
	return m.clusters.Get(ctx, name)
}

// OnChange registers fn to be called with a member's name whenever Set or Forget changes it.
func (m *Members) OnChange(fn func(name string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onChange = append(m.onChange, fn)
}

// OnReady registers fn to be called with a member's name whenever it is Set Ready.
func (m *Members) OnReady(fn func(name string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onReady = append(m.onReady, fn)
}
