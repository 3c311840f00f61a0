package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	fixture "configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/hubprocess"
)

// scaleFleet is the scale curve's fleet: the hub cluster, the slim members started so far (in
// fleet.members, in order: the first ones hold the heal bundles), the black holes, and the hub
// replicas running now.
type scaleFleet struct {
	*fleet
	cfg   scaleConfig
	say   func(string, ...any)
	holes *blackHoles
	// healthy and holes are how many members and black holes are registered now.
	healthy, registeredHoles int
	replicas                 []*hubReplica
}

// hubReplica is one running hub process; ID is its --replica-id, empty for an unsharded hub,
// and name its name in the fleet (StopHub) and its log's.
type hubReplica struct {
	ID, name string
	proc     *hubprocess.Process
}

// newScaleFleet starts the hub cluster's control plane and the members' shared etcd.
func newScaleFleet(ctx context.Context, cfg benchConfig, say func(string, ...any)) (*scaleFleet, error) {
	say("scale: starting the hub cluster and the members' shared etcd")
	opts := fleetOptions(cfg)
	shared, err := sharedOptions()
	if err != nil {
		return nil, err
	}
	opts.Shared, opts.Timeout = &shared, scaleTimeout
	f, err := fixture.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the hub cluster: %w", err)
	}
	return &scaleFleet{fleet: &fleet{Fleet: f, cfg: cfg}, cfg: cfg.Scale, say: say, holes: &blackHoles{}}, nil
}

// close stops the replicas, the black holes, the members and the hub cluster.
func (s *scaleFleet) close() {
	s.stopReplicas()
	s.holes.close()
	s.fleet.close()
}

// Members are started in steps, each after a look at the machine's memory, so that a machine
// that cannot host them (other work on it, say) stops the run with an error that says so
// instead of running out of memory.
const (
	// growStep is how many members are started at a time.
	growStep = 20
	// memberMemory is what a slim member costs the machine: its kube-apiserver's anonymous memory
	// and its share of the etcd (the capacity probe measured 87 MiB).
	memberMemory = 90 << 20
	// memoryFloor is the memory a step must leave available to everything else.
	memoryFloor = 3 << 30
)

// grow starts slim members until healthy run, growStep at a time.
func (s *scaleFleet) grow(ctx context.Context, healthy int) error {
	if have := len(s.Members()); have < healthy {
		s.say("scale: starting members %d to %d (slim kube-apiservers on the shared etcd)", have+1, healthy)
	}
	began := time.Now()
	for have := len(s.Members()); have < healthy; have = len(s.Members()) {
		n := min(growStep, healthy-have)
		avail, err := memAvailable()
		if err != nil {
			return err
		}
		if avail-float64(n*memberMemory) < memoryFloor {
			return fmt.Errorf("not enough memory for members %d to %d: %s available, they need about %s and %s must be left",
				have+1, have+n, mib(avail), mib(float64(n*memberMemory)), mib(memoryFloor))
		}
		if _, err := s.AddSlimMembers(ctx, memberNames(have, n)...); err != nil {
			return fmt.Errorf("starting members %d to %d: %w", have+1, have+n, err)
		}
	}
	s.say("scale: %d members running, started in %s", len(s.Members()), time.Since(began).Round(time.Second))
	return nil
}

// createHealBundles creates cfg.Bundles bench bundles in each heal member.
func (s *scaleFleet) createHealBundles(ctx context.Context) error {
	for _, m := range s.healMembers() {
		if err := fixture.EnsureNamespace(ctx, m.Client, "bench"); err != nil {
			return fmt.Errorf("creating namespace bench in %s: %w", m.Name, err)
		}
		err := parallel(ctx, s.cfg.Bundles, 8, func(ctx context.Context, i int) error {
			b := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%05d", i), Namespace: "bench"},
				Spec: configbundlev1alpha1.ConfigBundleSpec{Message: fmt.Sprintf("message %d", i)}}
			return m.Client.Create(ctx, b)
		})
		if err != nil {
			return fmt.Errorf("creating bundles in %s: %w", m.Name, err)
		}
	}
	return nil
}

// deleteHealBundles deletes the heal members' bundles and their ConfigMaps (the slim members
// run no garbage collector).
func (s *scaleFleet) deleteHealBundles(ctx context.Context) error {
	for _, m := range s.healMembers() {
		for _, obj := range []client.Object{&configbundlev1alpha1.ConfigBundle{}, &corev1.ConfigMap{}} {
			if err := m.Client.DeleteAllOf(ctx, obj, client.InNamespace("bench")); err != nil {
				return fmt.Errorf("deleting the bench objects of %s: %w", m.Name, err)
			}
		}
	}
	return nil
}

// healMembers are the members the heal measurement tampers with.
func (s *scaleFleet) healMembers() []*member {
	return s.Members()[:min(s.cfg.HealMembers, s.healthy)]
}

// startReplicas starts r hub replicas at once (sharded if more than one) and waits until they
// run their controllers (the Fleet exists).
func (s *scaleFleet) startReplicas(ctx context.Context, r int) error {
	replicas := make([]*hubReplica, r)
	errs := make([]error, r)
	var wg sync.WaitGroup
	for i := range r {
		wg.Go(func() { replicas[i], errs[i] = s.startReplica(ctx, i, r) })
	}
	wg.Wait()
	for _, rep := range replicas {
		if rep != nil {
			s.replicas = append(s.replicas, rep)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.WaitFleet(ctx)
}

// startReplica starts replica i of r, hub-<i+1>: the hub with default flags, and with
// --sharded and its own --replica-id when there are several.
func (s *scaleFleet) startReplica(ctx context.Context, i, r int) (*hubReplica, error) {
	rep := &hubReplica{name: fmt.Sprintf("hub-%d", i+1)}
	var args []string
	if r > 1 {
		rep.ID = fmt.Sprintf("replica-%d", i+1)
		args = s.shardedArgs(rep.ID)
	}
	var err error
	if rep.proc, err = s.StartHub(ctx, rep.name, args...); err != nil {
		return nil, fmt.Errorf("starting hub replica %d of %d: %w", i+1, r, err)
	}
	return rep, nil
}

// shardedArgs are the flags of the sharded replica id: --sharded, its --replica-id and the
// curve's --lease-duration if set.
func (s *scaleFleet) shardedArgs(id string) []string {
	args := []string{"--sharded", "--replica-id=" + id}
	if s.cfg.LeaseDuration > 0 {
		args = append(args, "--lease-duration="+s.cfg.LeaseDuration.String())
	}
	return args
}

// stopReplicas stops every replica at once (SIGTERM) and waits until they have exited.
func (s *scaleFleet) stopReplicas() {
	s.StopHubs()
	s.replicas = nil
}

// reset stops the replicas and unregisters every member: their Secrets, MemberClusters and
// the replicas' Leases are deleted, the heal bundles too, the black holes' connections closed.
func (s *scaleFleet) reset(ctx context.Context) {
	s.stopReplicas()
	if err := s.deleteHealBundles(ctx); err != nil {
		s.say("scale: cleaning up: %v", err)
	}
	ns := client.InNamespace(hubv1alpha1.DefaultSecretNamespace)
	for _, obj := range []client.Object{&corev1.Secret{}, &coordinationv1.Lease{}} {
		if err := s.Hub.DeleteAllOf(ctx, obj, ns); err != nil {
			s.say("scale: cleaning up: %v", err)
		}
	}
	if err := s.Hub.DeleteAllOf(ctx, &hubv1alpha1.MemberCluster{}); err != nil {
		s.say("scale: cleaning up: %v", err)
	}
	s.holes.dropConns()
	s.healthy, s.registeredHoles = 0, 0
}

// registerPointHoles registers the point's black holes.
func (s *scaleFleet) registerPointHoles(ctx context.Context, p *scalePoint) error {
	if err := s.registerHoles(ctx, s.holes, p.BlackHoles); err != nil {
		return err
	}
	s.registeredHoles = p.BlackHoles
	return nil
}

// joinMembers joins the point's healthy members one at a time, timing each from its Secret's
// creation to its MemberCluster being Ready, and counts the black holes not Ready after them.
func (s *scaleFleet) joinMembers(ctx context.Context, p *scalePoint) error {
	for _, m := range s.Members()[:p.Healthy] {
		took, err := s.join(ctx, m)
		if err != nil {
			return err
		}
		p.Joins = append(p.Joins, took)
		s.healthy++
	}
	var err error
	p.HolesNotReady, err = s.notReady(ctx, s.holes.names[:p.BlackHoles])
	return err
}

// waitCaughtUp waits until the replicas have caught up with the fleet: every registered member
// Ready and Connected, the heal members' bundles Ready and recorded, no replica with a
// ConfigBundle queued and, sharded, every member held by a live replica; then a moment more.
func (s *scaleFleet) waitCaughtUp(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, settlePoll, scaleTimeout, true, func(ctx context.Context) (bool, error) {
		if !s.AllReady(ctx, hubv1alpha1.ConnectedReason, s.Members()[:s.healthy]...) || !s.queuesEmpty() || !s.leasesHeld(ctx) {
			return false, nil
		}
		for _, m := range s.healMembers() {
			if !bundlesRecorded(ctx, m) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the hub replicas to catch up with %d members: %w", s.healthy, err)
	}
	return sleepCtx(ctx, restartQuiet)
}

// queuesEmpty reports whether no replica has a ConfigBundle queued.
func (s *scaleFleet) queuesEmpty() bool {
	for _, rep := range s.replicas {
		m, err := scrape(rep.proc.MetricsAddr)
		if err != nil || m.sum("workqueue_depth", func(l map[string]string) bool { return l["name"] == "configbundle" }) != 0 {
			return false
		}
	}
	return true
}
