package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	fixture "configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/hubprocess"
	"configbundle.dev/hub/internal/testing/netproxy"
)

// waitTimeout bounds every wait of the benchmark.
const waitTimeout = 5 * time.Minute

// member is one member cluster of the benchmark's fleet; its clients have benchClientConfig.
type member = fixture.Member

// fleet is the benchmark's fleet: the fixture's, the benchmark's configuration, and the hub
// process fixture.HubName when it runs.
type fleet struct {
	*fixture.Fleet
	cfg benchConfig
}

// fleetOptions are the fixture's options of every fleet of the benchmark: the control planes
// log the writes they serve, the clients are the benchmark's, BENCH_HUB_ARGS are more flags of
// every hub process (--pprof-bind-address=127.0.0.1:6060 to profile it at work, say), and with
// BENCH_DEBUG the directory of the hub's logs is kept.
func fleetOptions(cfg benchConfig) fixture.Options {
	return fixture.Options{
		Hub:          controlplane.Options{StartTimeout: 5 * time.Minute, AuditWrites: true, Fsync: true, Output: cpOutput},
		HubBinary:    cfg.HubBinary,
		HubArgs:      append([]string{"--zap-time-encoding=rfc3339nano"}, strings.Fields(os.Getenv("BENCH_HUB_ARGS"))...),
		ClientConfig: benchClientConfig,
		Keep:         os.Getenv("BENCH_DEBUG") != "",
		Timeout:      waitTimeout,
		Poll:         50 * time.Millisecond,
	}
}

// benchClientConfig is the benchmark's client config for a control plane: its own user agent
// (so that the audit logs tell its writes apart) and no client-side rate limit to speak of.
func benchClientConfig(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.QPS, c.Burst = 2000, 4000
	c.UserAgent = benchUserAgent
	return c
}

// close stops the hub and the fleet; with BENCH_DEBUG, it keeps the fleet's directory, with
// the hub's log and every write served (writes.log), and says where it is.
func (f *fleet) close() {
	f.StopHubs()
	if os.Getenv("BENCH_DEBUG") != "" {
		path, err := f.dumpWrites()
		fmt.Fprintf(os.Stderr, "bench: kept %s (hub.log; writes served: %s, error: %v)\n", f.Dir, path, err)
	}
	_ = f.Close()
}

// hub is the running hub process, nil if none runs.
func (f *fleet) hub() *hubprocess.Process { return f.HubProcess(fixture.HubName) }

// startHub runs the hub binary against the hub cluster, with default flags, and waits until its
// controllers run (the Fleet exists).
func (f *fleet) startHub(ctx context.Context) error {
	if _, err := f.StartHub(ctx, fixture.HubName); err != nil {
		return err
	}
	return f.WaitFleet(ctx)
}

func (f *fleet) stopHub() { f.StopHub(fixture.HubName, syscall.SIGTERM) }

// join registers a member and returns the time from its Secret's creation to its MemberCluster
// being Ready.
func (f *fleet) join(ctx context.Context, m *member) (time.Duration, error) {
	start := time.Now()
	if err := f.PutKubeconfig(ctx, m.Name, fixture.KubeconfigFor(m.Plane.Config)); err != nil {
		return 0, err
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		mc, err := f.GetMemberCluster(ctx, m.Name)
		return err == nil && meta.IsStatusConditionTrue(mc.Status.Conditions, hubv1alpha1.ReadyCondition), nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for %s to join: %w", m.Name, err)
	}
	return time.Since(start), nil
}

// blackHoles are members whose API server accepts connections and never answers.
type blackHoles struct {
	names []string
	holes []*netproxy.BlackHole
}

// registerBlackHoles registers n black holes.
func (f *fleet) registerBlackHoles(ctx context.Context, n int) (*blackHoles, error) {
	h := &blackHoles{}
	return h, f.registerHoles(ctx, h, n)
}

// registerHoles registers the first n black holes of h (black-hole-1, ...), adding listeners
// as needed.
func (f *fleet) registerHoles(ctx context.Context, h *blackHoles, n int) error {
	for i := range n {
		if i == len(h.holes) {
			hole, err := netproxy.StartBlackHole()
			if err != nil {
				return err
			}
			h.holes = append(h.holes, hole)
		}
		name := fmt.Sprintf("black-hole-%d", i+1)
		if i == len(h.names) {
			h.names = append(h.names, name)
		}
		if err := f.PutKubeconfig(ctx, name, fixture.BlackHoleKubeconfig(h.holes[i].Addr())); err != nil {
			return err
		}
	}
	return nil
}

// dropConns closes the connections accepted so far; the listeners stay.
func (h *blackHoles) dropConns() {
	for _, hole := range h.holes {
		hole.DropConns()
	}
}

func (h *blackHoles) close() {
	for _, hole := range h.holes {
		_ = hole.Close()
	}
}

// notReady counts the named members that are not Ready.
func (f *fleet) notReady(ctx context.Context, names []string) (int, error) {
	n := 0
	for _, name := range names {
		mc, err := f.GetMemberCluster(ctx, name)
		if err != nil {
			return 0, err
		}
		if !meta.IsStatusConditionTrue(mc.Status.Conditions, hubv1alpha1.ReadyCondition) {
			n++
		}
	}
	return n, nil
}

// converge creates bundles in members and times them until all are Ready, counting the hub's
// writes meanwhile.
func (f *fleet) converge(ctx context.Context, members []*member, perMember int, res *results) error {
	start := time.Now()
	for _, m := range members {
		if err := fixture.EnsureNamespace(ctx, m.Client, "bench"); err != nil {
			return err
		}
	}
	err := parallel(ctx, len(members)*perMember, 32, func(ctx context.Context, i int) error {
		m := members[i%len(members)]
		b := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%05d", i/len(members)), Namespace: "bench",
			Labels: map[string]string{"bench": "true"}}, Spec: configbundlev1alpha1.ConfigBundleSpec{Message: fmt.Sprintf("message %d", i)}}
		return m.Client.Create(ctx, b)
	})
	if err != nil {
		return fmt.Errorf("creating bundles: %w", err)
	}
	want := len(members) * perMember
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		ready := 0
		for _, m := range members {
			n, err := readyBundles(ctx, m)
			if err != nil {
				return false, nil
			}
			ready += n
		}
		return ready == want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d bundles to be Ready: %w", want, err)
	}
	res.ConvergedAt = time.Now()
	res.ConvergeTime = res.ConvergedAt.Sub(start)
	if os.Getenv("BENCH_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "bench: all %d bundles Ready at %s\n", want, res.ConvergedAt.UTC().Format(time.RFC3339Nano))
	}
	res.Bundles = want
	return f.countConvergenceWrites(start, res)
}

// readyBundles counts a member's bench bundles that are Ready.
func readyBundles(ctx context.Context, m *member) (int, error) {
	list := &configbundlev1alpha1.ConfigBundleList{}
	if err := m.Client.List(ctx, list, client.InNamespace("bench")); err != nil {
		return 0, err
	}
	ready := 0
	for _, b := range list.Items {
		if meta.IsStatusConditionTrue(b.Status.Conditions, configbundlev1alpha1.ReadyCondition) {
			ready++
		}
	}
	return ready, nil
}

// countConvergenceWrites counts the hub's writes from start to convergence, per bundle in the
// members by verb, and to the hub cluster.
func (f *fleet) countConvergenceWrites(start time.Time, res *results) error {
	all, err := f.servedWrites()
	if err != nil {
		return err
	}
	total := 0
	for _, w := range hubWritesIn(all, start, res.ConvergedAt) {
		if w.Plane == hubPlane {
			res.ConvergeHubWrites++
			continue
		}
		res.WritesByVerb[w.Verb] += 1 / float64(res.Bundles)
		total++
	}
	if total == 0 {
		// Then no count of the audit logs can be trusted, the steady state's neither.
		return errors.New("the members' audit logs hold no write of the hub during the convergence")
	}
	res.WritesPerBundle = float64(total) / float64(res.Bundles)
	return nil
}

// settleTime is how long after convergence the steady-state window opens: the last status
// writes, retries and counts of the convergence are done by then.
const settleTime = 10 * time.Second

// auditGrace lets the audit logs receive the last writes of a window before they are read.
const auditGrace = time.Second

// steady counts the hub's writes (on the API servers' side) and CPU in the steady-state window:
// cfg.Quiet from settleTime after convergence.
func (f *fleet) steady(ctx context.Context, res *results) error {
	from := res.ConvergedAt.Add(settleTime)
	if err := sleepCtx(ctx, time.Until(from)); err != nil {
		return err
	}
	reconcilesBefore, err := f.reconciles()
	if err != nil {
		return err
	}
	cpuBefore, err := cpuSeconds(f.hub().Pid())
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, f.cfg.Quiet); err != nil {
		return err
	}
	to := time.Now()
	cpuAfter, err := cpuSeconds(f.hub().Pid())
	if err != nil {
		return err
	}
	res.SteadyCPU = (cpuAfter - cpuBefore) / to.Sub(from).Seconds()
	reconcilesAfter, err := f.reconciles()
	if err != nil {
		return err
	}
	for result, n := range reconcilesAfter {
		if d := n - reconcilesBefore[result]; d > 0 {
			res.SteadyReconciles = append(res.SteadyReconciles, fmt.Sprintf("%s %.0f", result, d))
		}
	}
	if err := sleepCtx(ctx, auditGrace); err != nil {
		return err
	}
	all, err := f.servedWrites()
	if err != nil {
		return err
	}
	window := hubWritesIn(all, from, to)
	res.Steady = steadyState{From: from, To: to, Writes: window, Settle: hubWritesIn(all, res.ConvergedAt, from),
		Unplanned: unplanned(all, window)}
	return nil
}

// cost samples the hub's memory and goroutines once the fleet has settled (see sampleHubs).
func (f *fleet) cost(ctx context.Context, members, bundles, unmanaged int) (costPoint, error) {
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return costPoint{}, err
	}
	points, err := sampleHubs(ctx, []*hubprocess.Process{f.hub()})
	if err != nil {
		return costPoint{}, err
	}
	p := points[0]
	p.Members, p.Bundles, p.Unmanaged = members, bundles, unmanaged
	return p, nil
}

// sampleHubs samples hub processes' memory and goroutines: the least heap and RSS of ten
// samples over five seconds, which leaves out most garbage not yet collected, and the last
// goroutine count; one point per process.
func sampleHubs(ctx context.Context, procs []*hubprocess.Process) ([]costPoint, error) {
	points := make([]costPoint, len(procs))
	for i := range 10 {
		for j, proc := range procs {
			m, err := scrape(proc.MetricsAddr)
			if err != nil {
				return nil, err
			}
			rss, err := rssBytes(proc.Pid())
			if err != nil {
				return nil, err
			}
			p := &points[j]
			heap := m.sum("go_memstats_heap_inuse_bytes", nil)
			if i == 0 || heap < p.Heap {
				p.Heap = heap
			}
			if i == 0 || rss < p.RSS {
				p.RSS = rss
			}
			p.Goroutines = m.sum("go_goroutines", nil)
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
	return points, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// reconciles counts the ConfigBundle reconciles by result.
func (f *fleet) reconciles() (map[string]float64, error) {
	m, err := scrape(f.hub().MetricsAddr)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, result := range []string{"success", "error", "terminal", "notConnected"} {
		out[result] = m.sum("configbundle_reconciles_total", func(l map[string]string) bool { return l["result"] == result })
	}
	return out, nil
}
