package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	fixture "configbundle.dev/hub/internal/testing/fleet"
)

// The restart phase: RestartBundles bundles over (at most) restartMembers members, then a
// restart of the hub, which reconciles each of them once (the member's first full reconcile,
// its Synced condition). In each member one ConfigMap is tampered with while the hub is stopped
// and one as soon as the restarted hub has connected the member: both are heals the hub must
// make ahead of its backlog.
const (
	// restartMembers is the most members the phase spreads its bundles over.
	restartMembers = 6
	// goalRestartHeal is the goal: every heal within 2 s, of the drift made once the member is
	// connected, and from the connection for the drift made while the hub was stopped.
	goalRestartHeal = 2 * time.Second
	// restartNS holds the phase's bundles in each member; restartCreators create them, per member.
	restartNS       = "bench-restart"
	restartCreators = 8
	// restartTimeout bounds the phase's convergence and its first full reconcile after the
	// restart: 20,000 bundles on two cores take minutes.
	restartTimeout = 30 * time.Minute
	// restartPoll is how often the hub's metrics and the MemberClusters are read after the restart.
	restartPoll = 25 * time.Millisecond
)

// restartFlags holds the restart phase's flags until they are applied.
type restartFlags struct {
	bundles *int
	only    *bool
}

// bindRestartFlags defines the restart phase's flags on the default flag set.
func bindRestartFlags() *restartFlags {
	return &restartFlags{
		bundles: flag.Int("restart-bundles", 0, fmt.Sprintf("ConfigBundles created over the first %d members before a restart of the hub, whose heals right after are measured; 0 skips the restart phase (default: the configuration's).", restartMembers)),
		only:    flag.Bool("restart-only", false, fmt.Sprintf("Run the restart phase alone, on %d members at most (they join first), none of the other phases.", restartMembers)),
	}
}

// apply sets the flags given (set) in cfg.
func (r *restartFlags) apply(cfg *benchConfig, set map[string]bool) error {
	if set["restart-bundles"] {
		cfg.RestartBundles = *r.bundles
	}
	cfg.RestartOnly = *r.only
	if cfg.RestartBundles < 0 || cfg.RestartBundles > 0 && cfg.RestartBundles < 2*restartMembers {
		return fmt.Errorf("--restart-bundles must be 0 or at least %d (two drifts in each of %d members)", 2*restartMembers, restartMembers)
	}
	return nil
}

// restartResults are the figures of the restart phase.
type restartResults struct {
	Bundles int
	// Converged is the time the bundles took to be created and Ready, before the restart.
	Converged time.Duration
	Members   []restartMember
	// FleetEarly counts the times the Fleet, written by the restarted hub, was seen AllReady
	// while a member was not Synced.
	FleetEarly int
}

// restartMember is one member's figures, times from the start of the restarted hub.
type restartMember struct {
	Name    string
	Bundles int
	// Connected is when the hub had connected the member (its last successful probe metric).
	Connected time.Duration
	// Away is the heal of the drift made while the hub was stopped, from the connection; After
	// the heal of the drift made once the member was connected, from the drift. Zero: not
	// healed within driftTimeout.
	Away, After time.Duration
	// Synced is when its MemberCluster was seen Synced again.
	Synced time.Duration
}

// missed says whether the goal was missed.
func (r restartResults) missed() bool {
	for _, m := range r.Members {
		if m.Away == 0 || m.After == 0 || m.Away > goalRestartHeal || m.After > goalRestartHeal || m.Synced == 0 {
			return true
		}
	}
	return r.FleetEarly > 0 || len(r.Members) == 0
}

// measureRestart creates cfg.RestartBundles bundles over the first restartMembers members,
// waits until they are Ready, restarts the hub and measures the heals of the drifts made meanwhile
// and right after, and how long the first full reconcile takes. The bundles stay.
func (f *fleet) measureRestart(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	if cfg.RestartBundles < 1 {
		return nil
	}
	if f.hub() == nil {
		if err := f.restartHub(ctx, cfg); err != nil {
			return err
		}
	}
	rm := f.Members()[:min(restartMembers, len(f.Members()))]
	out := &res.Restart
	out.Bundles = cfg.RestartBundles
	say("restart: creating %d bundles over %d members, waiting until they are Ready", cfg.RestartBundles, len(rm))
	start := time.Now()
	counts, err := f.createRestartBundles(ctx, rm, cfg.RestartBundles)
	if err != nil {
		return err
	}
	out.Converged = time.Since(start)

	say("restart: stopping the hub, tampering with one ConfigMap per member, starting the hub")
	f.stopHub()
	for i, m := range rm {
		if err := fixture.Tamper(ctx, m.Client, client.ObjectKey{Namespace: restartNS, Name: restartBundle(counts[i] - 1)}, "tampered"); err != nil {
			return err
		}
	}
	started := time.Now()
	if _, err := f.StartHub(ctx, fixture.HubName); err != nil {
		return err
	}
	out.Members = make([]restartMember, len(rm))
	var wg sync.WaitGroup
	errs := make([]error, len(rm))
	connected := f.watchConnections(ctx, rm, started)
	for i, m := range rm {
		out.Members[i] = restartMember{Name: m.Name, Bundles: counts[i]}
		wg.Go(func() { errs[i] = measureRestartHeals(ctx, m, counts[i], started, <-connected[i], &out.Members[i]) })
	}
	err = f.watchSynced(ctx, rm, started, out)
	wg.Wait()
	return errors.Join(append(errs, err)...)
}

// restartBundle names the i-th bundle of the phase in a member.
func restartBundle(i int) string { return fmt.Sprintf("r-%05d", i) }

// createRestartBundles creates total bundles over members and waits until they are all Ready and
// the hub has nothing queued; it returns how many each member holds.
func (f *fleet) createRestartBundles(ctx context.Context, members []*member, total int) ([]int, error) {
	counts := make([]int, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		counts[i] = total / len(members)
		if i < total%len(members) {
			counts[i]++
		}
		wg.Go(func() {
			if errs[i] = fixture.EnsureNamespace(ctx, m.Client, restartNS); errs[i] == nil {
				errs[i] = fixture.CreateBundles(ctx, m.Client, restartNS, "r", "desired", counts[i], restartCreators)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// The hub's metrics first: listing thousands of bundles every poll would slow what it waits for.
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, restartTimeout, true, func(ctx context.Context) (bool, error) {
		metrics, err := scrape(f.hub().MetricsAddr)
		if err != nil || metrics.sum("workqueue_depth", func(l map[string]string) bool { return l["name"] == "configbundle" }) != 0 {
			return false, nil
		}
		for i, m := range members {
			if n, err := readyIn(ctx, m, restartNS); err != nil || n < counts[i] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d bundles to be Ready: %w", total, err)
	}
	return counts, nil
}

// readyIn counts the bundles of namespace ns of m that are Ready for their generation.
func readyIn(ctx context.Context, m *member, ns string) (int, error) {
	list := &configbundlev1alpha1.ConfigBundleList{}
	if err := m.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, b := range list.Items {
		if meta.IsStatusConditionTrue(b.Status.Conditions, configbundlev1alpha1.ReadyCondition) && b.Status.ObservedGeneration == b.Generation {
			n++
		}
	}
	return n, nil
}

// watchConnections scrapes the hub started at started until it has connected each member, and
// sends on the member's channel when it did.
func (f *fleet) watchConnections(ctx context.Context, members []*member, started time.Time) []chan time.Time {
	out := make([]chan time.Time, len(members))
	for i := range out {
		out[i] = make(chan time.Time, 1)
	}
	go func() {
		sent := make([]bool, len(members))
		_ = wait.PollUntilContextTimeout(ctx, restartPoll, waitTimeout, true, func(context.Context) (bool, error) {
			metrics, err := scrape(f.hub().MetricsAddr)
			if err != nil {
				return false, nil
			}
			done := true
			for i, m := range members {
				seen := metrics.sum("configbundle_member_last_probe_success_timestamp_seconds", func(l map[string]string) bool { return l["cluster"] == m.Name })
				if !sent[i] && seen >= float64(started.Unix()) {
					out[i] <- time.Now()
					sent[i] = true
				}
				done = done && sent[i]
			}
			return done, nil
		})
		for i := range out {
			if !sent[i] {
				close(out[i]) // never connected: the zero time
			}
		}
	}()
	return out
}

// measureRestartHeals measures the heals in m once the restarted hub has connected it (at
// connected; zero if it never did): of the drift made while the hub was stopped, from the
// connection, then of one made at once.
func measureRestartHeals(ctx context.Context, m *member, n int, started, connected time.Time, out *restartMember) error {
	if connected.IsZero() {
		return fmt.Errorf("restart: the hub did not connect %s again", m.Name)
	}
	out.Connected = connected.Sub(started)
	after := client.ObjectKey{Namespace: restartNS, Name: restartBundle(n - 2)}
	if err := fixture.Tamper(ctx, m.Client, after, "tampered"); err != nil {
		return err
	}
	tampered := time.Now()
	healed, err := awaitMessage(ctx, m, client.ObjectKey{Namespace: restartNS, Name: restartBundle(n - 1)}, "desired")
	if err == nil {
		out.Away = max(healed.Sub(connected), time.Microsecond)
	}
	healed, err2 := awaitMessage(ctx, m, after, "desired")
	if err2 == nil {
		out.After = max(healed.Sub(tampered), time.Microsecond)
	}
	return errors.Join(err, err2)
}

// awaitMessage waits, at most driftTimeout, until the ConfigMap key of m holds message, and
// returns when it was seen so: read at once, then watched.
func awaitMessage(ctx context.Context, m *member, key client.ObjectKey, message string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, driftTimeout)
	defer cancel()
	byName := client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", key.Name)}
	list := &corev1.ConfigMapList{}
	if err := m.Client.List(ctx, list, client.InNamespace(key.Namespace), byName); err != nil {
		return time.Time{}, err
	}
	if len(list.Items) == 1 && list.Items[0].Data[configbundlev1alpha1.MessageKey] == message {
		return time.Now(), nil
	}
	w, err := m.Client.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(key.Namespace), byName,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		return time.Time{}, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type != watch.Deleted && cm.Data[configbundlev1alpha1.MessageKey] == message {
			return time.Now(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%s/%s not healed within %s", m.Name, key, driftTimeout)
}

// watchSynced reads the Fleet and the hub's metrics until the hub started at started has
// reconciled once every bundle of every member (configbundle_member_unsynced_bundles at 0),
// counting the Fleet seen AllReady before.
func (f *fleet) watchSynced(ctx context.Context, members []*member, started time.Time, out *restartResults) error {
	err := wait.PollUntilContextTimeout(ctx, restartPoll, restartTimeout, true, func(ctx context.Context) (bool, error) {
		fl, err := f.GetFleet(ctx) // read first: the members are only more synced since
		if err != nil {
			return false, nil
		}
		metrics, err := scrape(f.hub().MetricsAddr)
		if err != nil {
			return false, nil
		}
		all := true
		for i, m := range members {
			left, ok := metrics.gauge("configbundle_member_unsynced_bundles", m.Name)
			if synced := ok && left == 0; !synced {
				all = false
			} else if out.Members[i].Synced == 0 {
				out.Members[i].Synced = time.Since(started)
			}
		}
		if !all && fl.Status.HeartbeatTime != nil && fl.Status.HeartbeatTime.After(started) &&
			meta.IsStatusConditionTrue(fl.Status.Conditions, hubv1alpha1.ReadyCondition) {
			out.FleetEarly++
		}
		return all, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for every member to be Synced after the restart: %w", err)
	}
	return nil
}

// gauge is the value of a gauge's series of member cluster, and whether there is one.
func (m metrics) gauge(name, cluster string) (float64, bool) {
	for _, s := range m[name].GetMetric() {
		if labelsOf(s)["cluster"] == cluster {
			return s.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// printRestart prints the restart phase's figures.
func (r *results) printRestart(p printer) {
	o := r.Restart
	if o.Bundles == 0 {
		return
	}
	p("\n1c. Heal latency right after a hub restart with %d bundles over %d members (created and Ready in %s before the restart)", o.Bundles, len(o.Members), o.Converged.Round(time.Second))
	p("| member | bundles | connected after the restart | heal of a drift made while the hub was stopped (from the connection) | heal of a drift made once connected | Synced after the restart |")
	p("|---|---|---|---|---|---|")
	for _, m := range o.Members {
		p("| %s | %d | %s | %s | %s | %s |", m.Name, m.Bundles, ms(m.Connected), healed(m.Away), healed(m.After), m.Synced.Round(100*time.Millisecond))
	}
	verdict := "ok"
	if o.missed() {
		verdict = "FAIL"
	}
	p("goal: every heal within %s while the hub works through its backlog, and the Fleet never AllReady before every member is Synced (seen AllReady early: %d): %s",
		goalRestartHeal, o.FleetEarly, verdict)
}

// healed prints a heal latency, or that it was not healed in time.
func healed(d time.Duration) string {
	if d == 0 {
		return "not healed"
	}
	return ms(d)
}
