package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/hubprocess"
	"configbundle.dev/hub/pkg/hubmanager"
)

// waitTimeout bounds every wait of the benchmark.
const waitTimeout = 5 * time.Minute

type member struct {
	Name   string
	cp     *controlplane.ControlPlane
	client client.WithWatch
	cfg    *rest.Config
}

type fleet struct {
	cfg     benchConfig
	dir     string
	hubCP   *controlplane.ControlPlane
	hub     client.Client
	scheme  *runtime.Scheme
	members []*member

	hubProc     *hubprocess.Process
	metricsAddr string
}

func newFleet(_ context.Context, cfg benchConfig, hubCP *controlplane.ControlPlane, cps []*controlplane.ControlPlane) (*fleet, error) {
	scheme, err := hubmanager.Scheme()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "configbundle-bench-")
	if err != nil {
		return nil, err
	}
	f := &fleet{cfg: cfg, dir: dir, hubCP: hubCP, scheme: scheme}
	if f.hub, err = client.New(benchClientConfig(hubCP.Config), client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if err := ensureNamespace(context.Background(), f.hub, hubv1alpha1.DefaultSecretNamespace); err != nil {
		return nil, err
	}
	for _, cp := range cps {
		if err := f.addMember(cp); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// benchClientConfig is the benchmark's client config for a control plane: its own user agent
// (so that the audit logs tell its writes apart) and no client-side rate limit to speak of.
func benchClientConfig(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.QPS, c.Burst = 2000, 4000
	c.UserAgent = benchUserAgent
	return c
}

// addMember adds the member of a control plane to the fleet (not to the hub: see join).
func (f *fleet) addMember(cp *controlplane.ControlPlane) error {
	m := &member{Name: cp.Name, cp: cp, cfg: benchClientConfig(cp.Config)}
	var err error
	if m.client, err = client.NewWithWatch(m.cfg, client.Options{Scheme: f.scheme}); err != nil {
		return fmt.Errorf("creating a client of %s: %w", cp.Name, err)
	}
	f.members = append(f.members, m)
	return nil
}

// close stops the hub and removes the benchmark's directory; with BENCH_DEBUG, it keeps it,
// with the hub's log and every write served (writes.log), and says where it is.
func (f *fleet) close() {
	f.stopHub()
	if os.Getenv("BENCH_DEBUG") == "" {
		_ = os.RemoveAll(f.dir)
		return
	}
	path, err := f.dumpWrites()
	fmt.Fprintf(os.Stderr, "bench: kept %s (hub.log; writes served: %s, error: %v)\n", f.dir, path, err)
}

// startHub runs the hub binary against the hub cluster, with default flags, and waits until its
// controllers run (the Fleet exists).
func (f *fleet) startHub() error {
	var err error
	f.hubProc, err = hubprocess.Start(context.Background(), hubprocess.Options{Binary: f.cfg.HubBinary, Kubeconfig: f.hubCP.KubeconfigPath,
		LogPath: filepath.Join(f.dir, "hub.log"), Args: []string{"--zap-time-encoding=rfc3339nano"}, ReadyTimeout: waitTimeout})
	if err != nil {
		return err
	}
	f.metricsAddr = f.hubProc.MetricsAddr
	return wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		return f.hub.Get(ctx, client.ObjectKey{Name: hubv1alpha1.FleetName}, &hubv1alpha1.Fleet{}) == nil, nil
	})
}

func (f *fleet) stopHub() {
	f.hubProc.Stop(syscall.SIGTERM)
	f.hubProc = nil
}

// putSecret writes a member's kubeconfig Secret on the hub.
func (f *fleet) putSecret(ctx context.Context, name string, kubeconfig []byte) error {
	return f.hub.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubv1alpha1.DefaultSecretNamespace, Labels: map[string]string{hubv1alpha1.DefaultSecretLabel: "true"}},
		Data:       map[string][]byte{hubv1alpha1.DefaultSecretKey: kubeconfig},
	})
}

// join registers a member and returns the time from its Secret's creation to its MemberCluster
// being Ready.
func (f *fleet) join(ctx context.Context, m *member) (time.Duration, error) {
	start := time.Now()
	if err := f.putSecret(ctx, m.Name, kubeconfigFor(m.cp.Config)); err != nil {
		return 0, err
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		mc := &hubv1alpha1.MemberCluster{}
		if err := f.hub.Get(ctx, client.ObjectKey{Name: m.Name}, mc); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(mc.Status.Conditions, hubv1alpha1.ReadyCondition), nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for %s to join: %w", m.Name, err)
	}
	return time.Since(start), nil
}

type blackHoles struct {
	names     []string
	listeners []net.Listener
	mu        sync.Mutex
	conns     []net.Conn
}

// registerBlackHoles registers members whose API server accepts connections and never answers.
func (f *fleet) registerBlackHoles(ctx context.Context, n int) (*blackHoles, error) {
	h := &blackHoles{}
	return h, f.registerHoles(ctx, h, n)
}

// registerHoles registers the first n black holes of h (black-hole-1, ...), adding listeners
// as needed: their Secrets are created, so none may exist.
func (f *fleet) registerHoles(ctx context.Context, h *blackHoles, n int) error {
	for i := range n {
		if i == len(h.listeners) {
			if err := h.listen(); err != nil {
				return err
			}
		}
		name := fmt.Sprintf("black-hole-%d", i+1)
		if i == len(h.names) {
			h.names = append(h.names, name)
		}
		cfg := &rest.Config{Host: "https://" + h.listeners[i].Addr().String(), BearerToken: "t", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
		if err := f.putSecret(ctx, name, kubeconfigFor(cfg)); err != nil {
			return err
		}
	}
	return nil
}

// listen adds a listener that accepts connections and never answers.
func (h *blackHoles) listen() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening for a black hole: %w", err)
	}
	h.listeners = append(h.listeners, l)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	return nil
}

// dropConns closes the connections accepted so far; the listeners stay.
func (h *blackHoles) dropConns() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
}

func (h *blackHoles) close() {
	for _, l := range h.listeners {
		l.Close()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
}

// notReady counts the named members that are not Ready.
func (f *fleet) notReady(ctx context.Context, names []string) (int, error) {
	n := 0
	for _, name := range names {
		mc := &hubv1alpha1.MemberCluster{}
		if err := f.hub.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
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
		if err := ensureNamespace(ctx, m.client, "bench"); err != nil {
			return err
		}
	}
	err := parallel(ctx, len(members)*perMember, 32, func(ctx context.Context, i int) error {
		m := members[i%len(members)]
		b := &configbundlev1alpha1.ConfigBundle{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%05d", i/len(members)), Namespace: "bench",
			Labels: map[string]string{"bench": "true"}}, Spec: configbundlev1alpha1.ConfigBundleSpec{Message: fmt.Sprintf("message %d", i)}}
		return m.client.Create(ctx, b)
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
	if err := m.client.List(ctx, list, client.InNamespace("bench")); err != nil {
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
	cpuBefore, err := cpuSeconds(f.hubProc.Pid())
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, f.cfg.Quiet); err != nil {
		return err
	}
	to := time.Now()
	cpuAfter, err := cpuSeconds(f.hubProc.Pid())
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
	points, err := sampleHubs(ctx, []*hubprocess.Process{f.hubProc})
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

// kubeconfigFor renders a self-contained kubeconfig for a client config.
func kubeconfigFor(cfg *rest.Config) []byte {
	data, _ := controlplane.KubeconfigFor("c", cfg)
	return data
}

// reconciles counts the ConfigBundle reconciles by result.
func (f *fleet) reconciles() (map[string]float64, error) {
	m, err := scrape(f.metricsAddr)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, result := range []string{"success", "error", "terminal", "notConnected"} {
		out[result] = m.sum("configbundle_reconciles_total", func(l map[string]string) bool { return l["result"] == result })
	}
	return out, nil
}
