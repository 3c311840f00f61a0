package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/pkg/configbundle"
)

// driftTimeout bounds the wait for one heal.
const driftTimeout = 30 * time.Second

// targetsPerMember is how many ConfigMaps of a member the drifts cycle through.
const targetsPerMember = 50

// driftPace is the least time between the starts of two drifts in one member: 20 drifts a
// second per member. A heal costs the hub about three requests here (the write, the status
// write that counts it a second later, a share of Events and, for a deletion, a read of the
// bundle): about 58 a second per member, over the client's 50 QPS but within its burst of 100
// for a turn's 10 s, which measurably adds nothing (docs/performance.md).
const driftPace = 50 * time.Millisecond

// desiredConfigMaps renders the ConfigMaps a member's bench bundles ask for.
func desiredConfigMaps(ctx context.Context, m *member) (map[string]*corev1.ConfigMap, error) {
	list := &configbundlev1alpha1.ConfigBundleList{}
	if err := m.Client.List(ctx, list, client.InNamespace("bench")); err != nil {
		return nil, err
	}
	desired := map[string]*corev1.ConfigMap{}
	for i := range list.Items {
		desired[list.Items[i].Name] = configbundle.DesiredConfigMap(&list.Items[i])
	}
	return desired, nil
}

type seen struct {
	typ watch.EventType
	cm  *corev1.ConfigMap
	at  time.Time
}

// driftKinds name the kinds of drift the benchmark makes, in turn; driftOnce's kind indexes it.
var driftKinds = [...]string{"data changed", "label added", "ownerReference removed", "deleted"}

// heals are heal latencies by drift kind (driftKinds).
type heals [len(driftKinds)]latencies

// all returns the latencies of every kind together.
func (h heals) all() latencies { return slices.Concat(h[:]...) }

// add appends o's latencies to h's, kind by kind.
func (h *heals) add(o heals) {
	for k := range h {
		h[k] = append(h[k], o[k]...)
	}
}

// drifts tampers with managed ConfigMaps, n times over the members (one drift at a time per
// member, the members at once), and returns the heal latencies and the number of drifts not
// healed in time. It works the same whoever heals: the hub or the floor.
func (f *fleet) drifts(ctx context.Context, members []*member, n int) (latencies, int, error) {
	h, failures, err := f.driftsByKind(ctx, members, n)
	return h.all(), failures, err
}

// driftsByKind is drifts, with the latencies by drift kind.
func (f *fleet) driftsByKind(ctx context.Context, members []*member, n int) (heals, int, error) {
	var mu sync.Mutex
	var all heals
	failures := 0
	var wg sync.WaitGroup
	errs := make([]error, len(members))
	for mi, m := range members {
		share := n / len(members)
		if mi < n%len(members) {
			share++
		}
		wg.Go(func() {
			h, failed, err := driftMember(ctx, m, share)
			errs[mi] = err
			mu.Lock()
			all.add(h)
			failures += failed
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, failures, errors.Join(errs...)
}

func driftMember(ctx context.Context, m *member, n int) (heals, int, error) {
	var h heals
	desired, err := desiredConfigMaps(ctx, m)
	if err != nil {
		return h, 0, err
	}
	targets := make([]string, 0, targetsPerMember)
	for i := 0; len(targets) < targetsPerMember && len(targets) < len(desired); i++ {
		if _, ok := desired[fmt.Sprintf("b-%05d", i)]; ok {
			targets = append(targets, fmt.Sprintf("b-%05d", i))
		}
	}
	if len(targets) == 0 {
		return h, 0, fmt.Errorf("no bench bundles in %s", m.Name)
	}
	events, stop, err := watchTargets(ctx, m, targets)
	if err != nil {
		return h, 0, err
	}
	defer stop()

	failures := 0
	pace := time.NewTicker(driftPace)
	defer pace.Stop()
	for i := range n {
		select {
		case <-pace.C:
		case <-ctx.Done():
			return h, failures, ctx.Err()
		}
		name, kind := targets[i%len(targets)], i%len(driftKinds)
		d, err := driftOnce(ctx, m, name, kind, desired[name], events[name])
		if err != nil {
			if ctx.Err() != nil {
				return h, failures, ctx.Err()
			}
			failures++
			continue
		}
		h[kind] = append(h[kind], d)
	}
	return h, failures, nil
}

// watchTargets watches the bench ConfigMaps of m from now on and passes the events of each
// target to its own channel.
func watchTargets(ctx context.Context, m *member, targets []string) (map[string]chan seen, func(), error) {
	list := &corev1.ConfigMapList{}
	if err := m.Client.List(ctx, list, client.InNamespace("bench")); err != nil {
		return nil, nil, err
	}
	w, err := m.Client.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace("bench"),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return nil, nil, err
	}
	events := map[string]chan seen{}
	for _, t := range targets {
		events[t] = make(chan seen, 256)
	}
	go func() {
		for ev := range w.ResultChan() {
			at := time.Now()
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok {
				if ch, ok := events[cm.Name]; ok {
					select {
					case ch <- seen{typ: ev.Type, cm: cm, at: at}:
					default:
					}
				}
			}
		}
	}()
	return events, w.Stop, nil
}

// driftOnce makes one kind of drift (driftKinds) and waits for the heal seen through the watch.
func driftOnce(ctx context.Context, m *member, name string, kind int, desired *corev1.ConfigMap, events chan seen) (time.Duration, error) {
	since, err := tamper(ctx, m, name, kind)
	if err != nil {
		return 0, err
	}
	acked := time.Now()
	healed, err := awaitHeal(ctx, m, name, desired, events, since, driftTimeout)
	if err != nil {
		return 0, err
	}
	return max(0, healed.Sub(acked)), nil
}

// tamper makes one kind of drift in the ConfigMap name of m: 0 changes its data, 1 adds a
// label, 2 drops its owner, 3 deletes it. It returns the resourceVersion a heal must be newer
// than.
func tamper(ctx context.Context, m *member, name string, kind int) (int64, error) {
	cm := &corev1.ConfigMap{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: "bench", Name: name}, cm); err != nil {
		return 0, err
	}
	before := rv(cm)
	var err error
	switch kind {
	case 0:
		cm.Data = map[string]string{"message": "tampered"}
		err = m.Client.Update(ctx, cm)
	case 1:
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["drift"] = "by-hand"
		err = m.Client.Update(ctx, cm)
	case 2:
		cm.OwnerReferences = nil
		err = m.Client.Update(ctx, cm)
	case 3:
		err = m.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
	}
	if err != nil {
		return 0, fmt.Errorf("tampering with %s/%s: %w", m.Name, name, err)
	}
	return max(before, rv(cm)), nil // for a delete, the rv before it: the recreated object is newer
}

// awaitHeal waits, at most timeout, for the event of the ConfigMap name of m (events, from
// watchTargets) that shows it newer than the resourceVersion since and as desired, and returns
// when it was seen.
func awaitHeal(ctx context.Context, m *member, name string, desired *corev1.ConfigMap, events chan seen, since int64, timeout time.Duration) (time.Time, error) {
	expired := time.After(timeout)
	for {
		select {
		case ev := <-events:
			if ev.typ == watch.Deleted || rv(ev.cm) <= since {
				continue
			}
			if len(configbundle.Drift(desired, ev.cm)) == 0 {
				return ev.at, nil
			}
		case <-expired:
			return time.Time{}, fmt.Errorf("%s/%s not healed within %s", m.Name, name, timeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// rv reads a resourceVersion as the etcd revision it is. (Clients must treat resourceVersions
// as opaque; the benchmark compares them only to order the events of its own writes.)
func rv(obj metav1.Object) int64 {
	n, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
	return n
}

// startFloor runs the physical floor against the members: one informer on the bench
// ConfigMaps per member and, for every event that shows drift, one write that heals it.
// Nothing else: no queue, no cache of bundles, no status.
func startFloor(ctx context.Context, members []*member) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	for _, m := range members {
		desired, err := desiredConfigMaps(ctx, m)
		if err != nil {
			cancel()
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(m.Config)
		if err != nil {
			cancel()
			return nil, err
		}
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("bench"))
		inf := factory.Core().V1().ConfigMaps().Informer()
		heal := func(obj any) {
			cm, ok := obj.(*corev1.ConfigMap)
			if !ok {
				return
			}
			want, ok := desired[cm.Name]
			if !ok || len(configbundle.Drift(want, cm)) == 0 {
				return
			}
			healed := want.DeepCopy()
			healed.ResourceVersion = cm.ResourceVersion
			_, _ = cs.CoreV1().ConfigMaps("bench").Update(ctx, healed, metav1.UpdateOptions{})
		}
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) { heal(obj) },
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if cm, ok := obj.(*corev1.ConfigMap); ok {
					if want, ok := desired[cm.Name]; ok {
						_, _ = cs.CoreV1().ConfigMaps("bench").Create(ctx, want.DeepCopy(), metav1.CreateOptions{})
					}
				}
			},
		})
		if err != nil {
			cancel()
			return nil, err
		}
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
	}
	return cancel, nil
}
