package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/hubprocess"
)

// LogPath is the log of the hub process name: <Dir>/<name>.log. A restarted process appends
// to it.
func (f *Fleet) LogPath(name string) string { return filepath.Join(f.Dir, name+".log") }

// StartHub starts a hub process against the hub cluster, with Options.HubArgs and args, and
// waits until it reports ready. The name (HubName for the one hub of an unsharded fleet) names
// it to StopHub and its log; a process of that name must not be running. StartHub after StopHub
// restarts a hub, as after a crash (SIGKILL) or an upgrade (SIGTERM).
func (f *Fleet) StartHub(ctx context.Context, name string, args ...string) (*hubprocess.Process, error) {
	f.mu.Lock()
	_, running := f.hubs[name]
	f.mu.Unlock()
	if running {
		return nil, fmt.Errorf("hub %s is running already", name)
	}
	proc, err := hubprocess.Start(ctx, hubprocess.Options{Binary: f.Binary, Kubeconfig: f.HubKubeconfig, LogPath: f.LogPath(name),
		Args: append(slices.Clone(f.opts.HubArgs), args...), ReadyTimeout: f.opts.Timeout})
	if err != nil {
		return nil, fmt.Errorf("starting hub %s: %w", name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hubs[name] = proc
	return proc, nil
}

// StartReplica starts replica id of a sharded hub: StartHub with --sharded and --replica-id.
func (f *Fleet) StartReplica(ctx context.Context, id string, args ...string) (*hubprocess.Process, error) {
	return f.StartHub(ctx, id, append([]string{"--sharded", "--replica-id=" + id}, args...)...)
}

// StopHub ends the hub process name with sig (SIGTERM to stop, SIGKILL as a crash would) and
// waits until it has exited; a name not running is no error.
func (f *Fleet) StopHub(name string, sig syscall.Signal) {
	f.mu.Lock()
	p := f.hubs[name]
	delete(f.hubs, name)
	f.mu.Unlock()
	p.Stop(sig) // nil: none runs
}

// StopHubs stops every hub process at once (SIGTERM) and waits until they have exited.
func (f *Fleet) StopHubs() {
	var wg sync.WaitGroup
	for _, name := range f.HubNames() {
		wg.Go(func() { f.StopHub(name, syscall.SIGTERM) })
	}
	wg.Wait()
}

// HubProcess returns the running hub process name, nil if there is none.
func (f *Fleet) HubProcess(name string) *hubprocess.Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hubs[name]
}

// HubNames returns the names of the running hub processes, sorted.
func (f *Fleet) HubNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, 0, len(f.hubs))
	for name := range f.hubs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// WaitFleet waits until the Fleet exists: the hub processes run their controllers.
func (f *Fleet) WaitFleet(ctx context.Context) error {
	err := f.poll(ctx, func(ctx context.Context) (bool, error) {
		return f.Hub.Get(ctx, client.ObjectKey{Name: hubv1alpha1.FleetName}, &hubv1alpha1.Fleet{}) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Fleet: %w", err)
	}
	return nil
}

// poll polls cond every Options.Poll until Options.Timeout.
func (f *Fleet) poll(ctx context.Context, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, f.opts.Poll, f.opts.Timeout, true, cond)
}

// WaitReported waits until the hub process name reports every MemberCluster of the hub (a
// configbundle_member_ready series each, whatever its value): the MemberClusters' status is
// then its own view, not the one a previous hub process left behind, which a restarted hub
// replaces (Connecting, until it has connected again).
func (f *Fleet) WaitReported(ctx context.Context, name string) error {
	err := f.poll(ctx, func(ctx context.Context) (bool, error) {
		list := &hubv1alpha1.MemberClusterList{}
		if err := f.Hub.List(ctx, list); err != nil {
			return false, nil
		}
		scrape, err := f.ScrapeHub(name)
		if err != nil {
			return false, nil
		}
		for _, mc := range list.Items {
			if Sample(scrape, `configbundle_member_ready{cluster="`+mc.Name+`"}`) < 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for hub %s to report every member: %w", name, err)
	}
	return nil
}
