// Package demo runs ConfigBundle Hub on an embedded local fleet and narrates it: real control
// planes for a hub and members on loopback (package controlplane), the hub binary running
// against them, members registered with `hub register`, sample bundles applied, a ConfigMap
// tampered with and healed, a member paused and reported Unreachable, the ClusterSet global
// bound into the namespace default (config/samples/clusterset_global.yaml), a FleetBundle placed by
// label, moved by a label change and restored after a placed bundle is deleted by hand, and a
// staged rollout: canary first, halted when the canary's own admission control refuses a value
// while the rest of the fleet keeps the old one, then a fix rolled out; and per-member values: a
// FleetBundle whose template is rendered for each member from its MemberCluster's name and labels,
// with an override for a dev member, re-rendered for the member alone whose label changes, and
// reported RenderFailed for a member that lacks the label it reads while that member keeps what it
// holds and the others proceed; last, a guarded ConfigMap (driftPolicy Guard) that its member
// refuses to let be edited while the hub process is stopped. `make demo` runs it; a test runs it too, so that it cannot rot.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// Options configure Run. Each field documents its default.
type Options struct {
	// Out receives the narration. Defaults to os.Stdout.
	Out io.Writer
	// HubBinary is the hub binary to run. Required.
	HubBinary string
	// Members is the number of member clusters. Defaults to 3.
	Members int
	// Keep keeps the fleet running after the tour, until ctx ends. Defaults to false.
	Keep bool
	// ProbeInterval is the hub's --probe-interval. Defaults to 2 seconds, so that a paused
	// member is noticed within seconds.
	ProbeInterval time.Duration
}

// stepTimeout bounds every wait of the tour.
const stepTimeout = 2 * time.Minute

type demo struct {
	opts Options
	out  io.Writer
	// fl is the fleet once startFleet started it, members its members in order.
	fl      *fleet.Fleet
	members []*fleet.Member
	// fb is the sample FleetBundle once the placement step applied it, and placed the number of
	// members it is placed in (counted by the Fleet).
	fb     *hubv1alpha1.FleetBundle
	placed int
	// rolloutFB is the staged rollout's FleetBundle once the rollout step applied it.
	rolloutFB *hubv1alpha1.FleetBundle
	// templatedFB is the templates step's FleetBundle once it applied it.
	templatedFB *hubv1alpha1.FleetBundle
	// gcProbe receives the outcome of probeGarbageCollectors, started when the members join.
	gcProbe chan error
}

// Run starts the fleet, takes the tour, and cleans up everything it started when it ends or ctx
// is cancelled (Ctrl-C).
func Run(ctx context.Context, opts Options) (err error) {
	if opts.HubBinary == "" {
		return errors.New("no hub binary given")
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Members <= 0 {
		opts.Members = 3
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = 2 * time.Second
	}
	d := &demo{opts: opts, out: opts.Out}
	defer func() {
		d.say("==> Cleaning up: stopping the hub and the control planes")
		err = errors.Join(err, d.cleanup())
	}()
	steps := []func(context.Context) error{d.startFleet, d.startHub, d.register, d.applySamples, d.tamper, d.pause, d.bindGlobal, d.place, d.move, d.restore, d.rollout, d.workloads, d.templates, d.guard, d.summary}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	if opts.Keep {
		d.keep()
		<-ctx.Done()
		return nil
	}
	d.say("\nTo keep the fleet running and explore it with kubectl: make demo DEMO_ARGS=--keep")
	return nil
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *demo) startFleet(ctx context.Context) error {
	names := []string{}
	for i := 1; i <= d.opts.Members; i++ {
		names = append(names, fmt.Sprintf("member-%d", i))
	}
	d.say("==> Starting a local fleet: a hub and %d members (%s), each a real etcd + kube-apiserver on loopback", len(names), strings.Join(names, ", "))
	start := time.Now()
	dir, err := os.MkdirTemp("", "configbundle-demo-")
	if err != nil {
		return err
	}
	// Members get a garbage collector, so that deleting a bundle really deletes its ConfigMap, and
	// the deployment controllers, so that the workloads step's Deployments get Pods.
	d.fl, err = fleet.Start(ctx, fleet.Options{
		Members: controlplane.Named(controlplane.Options{GarbageCollector: true, Controllers: []string{"deployment", "replicaset", "serviceaccount"}},
			names...), HubBinary: d.opts.HubBinary,
		HubArgs: []string{"--probe-interval=" + d.opts.ProbeInterval.String()}, Dir: dir, Timeout: stepTimeout,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("starting the local fleet: %w", err)
	}
	d.members = d.fl.Members()
	d.say("    started in %s (the members have no ConfigBundle CRD yet: the hub installs it when they join)", time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (d *demo) startHub(ctx context.Context) error {
	d.say("==> Starting the hub process against the hub cluster (log: %s)", d.fl.LogPath(fleet.HubName))
	_, err := d.fl.StartHub(ctx, fleet.HubName)
	return err
}

func (d *demo) register(ctx context.Context) error {
	d.say("==> Registering the members with `hub register` (ServiceAccount, least-privilege RBAC and a token in the member; a labelled kubeconfig Secret on the hub)")
	start := time.Now()
	for _, m := range d.members {
		out, err := d.fl.Register(ctx, m.Name)
		if err != nil {
			return err
		}
		d.say("    $ hub register %s ...\n    %s", m.Name, strings.TrimSpace(string(out)))
	}
	d.say("==> Members joining: the hub connects in the background, installs the CRD, warms its caches")
	if err := d.poll(ctx, "every member to be Ready", d.allMembers(hubv1alpha1.ConnectedReason)); err != nil {
		return err
	}
	d.say("    all %d members Ready %s after registration", len(d.members), time.Since(start).Round(100*time.Millisecond))
	d.startGarbageCollectorProbe(ctx)
	return d.table(ctx, "memberclusters")
}

// samples are the bundles applied to every member: config/samples, in the namespace default.
func samples() ([]*configbundlev1alpha1.ConfigBundle, error) {
	bundles, err := config.SampleBundles()
	for _, b := range bundles {
		b.Namespace = "default"
	}
	return bundles, err
}

func (d *demo) applySamples(ctx context.Context) error {
	bundles, err := samples()
	if err != nil {
		return err
	}
	d.say("==> Applying the %d sample ConfigBundles of config/samples to every member", len(bundles))
	for _, m := range d.members {
		for _, b := range bundles {
			b := b.DeepCopy()
			if err := m.Client.Create(ctx, b); err != nil {
				return fmt.Errorf("creating ConfigBundle %s in %s: %w", b.Name, m.Name, err)
			}
		}
	}
	if err := d.poll(ctx, "every bundle to be Ready", d.fleetReady); err != nil {
		return err
	}
	return d.table(ctx, "fleets")
}

func (d *demo) tamper(ctx context.Context) error {
	m := d.members[0]
	d.say("==> Tampering with a managed ConfigMap by hand: %s default/greeting, data.message := \"tampered\"", m.Name)
	elapsed, err := d.tamperAndWatch(ctx, m.Name, "greeting")
	if err != nil {
		return err
	}
	d.say("    healed in %s (from the tampering write's acknowledgement to the healed ConfigMap seen through a watch)", elapsed.Round(time.Microsecond))
	return nil
}

// tamperAndWatch changes a managed ConfigMap and times its heal.
func (d *demo) tamperAndWatch(ctx context.Context, member, name string) (time.Duration, error) {
	c := d.fl.Member(member).Client
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cm); err != nil {
		return 0, err
	}
	want, original := cm.Data["message"], cm.ResourceVersion
	w, err := c.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace("default"), client.MatchingFields{"metadata.name": name},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: original}})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	cm.Data["message"] = "tampered"
	if err := c.Update(ctx, cm); err != nil {
		return 0, err
	}
	acked, tampered := time.Now(), cm.ResourceVersion
	timeout := time.After(stepTimeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, errors.New("watch closed before the heal")
			}
			got, ok := ev.Object.(*corev1.ConfigMap)
			if ok && got.ResourceVersion != original && got.ResourceVersion != tampered && got.Data["message"] == want {
				return time.Since(acked), nil
			}
		case <-timeout:
			return 0, fmt.Errorf("no heal within %s", stepTimeout)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

func (d *demo) pause(ctx context.Context) error {
	if len(d.members) < 2 {
		return nil
	}
	paused, other := d.members[1], d.members[0]
	d.say("==> Pausing %s (SIGSTOP on its kube-apiserver): it hangs, as a member behind a broken network would", paused.Name)
	if err := paused.Plane.Pause(); err != nil {
		return err
	}
	start := time.Now()
	if err := d.poll(ctx, paused.Name+" to be reported Unreachable", d.memberReason(paused.Name, hubv1alpha1.UnreachableReason)); err != nil {
		_ = paused.Plane.Resume()
		return err
	}
	d.say("    reported Unreachable after %s (probes every %s, two failures in a row)", time.Since(start).Round(100*time.Millisecond), d.opts.ProbeInterval)
	if err := d.table(ctx, "memberclusters"); err != nil {
		_ = paused.Plane.Resume()
		return err
	}
	elapsed, err := d.tamperAndWatch(ctx, other.Name, "web-banner")
	if err != nil {
		_ = paused.Plane.Resume()
		return err
	}
	d.say("    meanwhile %s still heals: web-banner tampered and healed in %s", other.Name, elapsed.Round(time.Microsecond))
	d.say("==> Resuming %s (SIGCONT)", paused.Name)
	if err := paused.Plane.Resume(); err != nil {
		return err
	}
	start = time.Now()
	if err := d.poll(ctx, "every member to be Ready again", d.allMembers(hubv1alpha1.ConnectedReason)); err != nil {
		return err
	}
	d.say("    %s Ready again after %s", paused.Name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

func (d *demo) summary(ctx context.Context) error {
	d.say("==> The hub's summary")
	if err := d.poll(ctx, "the fleet to be Ready", d.fleetReady); err != nil {
		return err
	}
	d.say("$ kubectl get memberclusters")
	if err := d.table(ctx, "memberclusters"); err != nil {
		return err
	}
	d.say("$ kubectl get fleet")
	return d.table(ctx, "fleets")
}

func (d *demo) keep() {
	d.say("\n==> The fleet keeps running until you press Ctrl-C. Point kubectl and hub at it (contexts %s; %s is the current one):", strings.Join(d.contexts(), ", "), fleet.HubName)
	d.say("    export KUBECONFIG=%s", d.kubeconfig())
	d.say("    kubectl get memberclusters -o wide; kubectl get fleet; kubectl wait --for=condition=Ready fleet/default")
	if d.fb != nil {
		d.say("    kubectl get fleetbundles -A; kubectl label memberclusters %s %s=%s --overwrite    # places %s there again", d.members[1].Name, envKey, prodEnv, d.fb.Name)
	}
	if d.rolloutFB != nil {
		d.say("    %[1]s rollout status %[2]s; %[1]s rollout history %[2]s; %[1]s rollout undo %[2]s    # the staged rollout (with --hub-kubeconfig, or KUBECONFIG as below)", d.opts.HubBinary, rolloutName)
	}
	if d.templatedFB != nil {
		d.say("    %[1]s render %[2]s -n %[3]s; kubectl label memberclusters %[4]s %[5]s=%[6]s --overwrite    # per-member values: preview them; re-render %[4]s", d.opts.HubBinary, templatedName, d.templatedFB.Namespace, d.members[1].Name, regionKey, movedRegion)
	}
	for _, m := range d.members {
		d.say("    kubectl --context %s get configbundles -A", m.Name)
	}
	d.say("    %[1]s register %[2]s --member-context %[2]s --hub-context %[3]s --wait    # rotates %[2]s's token", d.opts.HubBinary, d.members[0].Name, fleet.HubName)
	if p := d.fl.HubProcess(fleet.HubName); p != nil {
		d.say("    hub metrics: curl -s http://%s/metrics | grep ^configbundle_", p.MetricsAddr)
	}
	d.say("    hub log: %s", d.fl.LogPath(fleet.HubName))
}

// contexts are the names of the contexts of kubeconfig(): the hub's, then the members'.
func (d *demo) contexts() []string {
	names := []string{fleet.HubName}
	for _, m := range d.members {
		names = append(names, m.Name)
	}
	return names
}

// kubeconfig is a KUBECONFIG value, the list of the control planes' kubeconfig files, that
// merges them: each file has one cluster, user and context named after its plane, so none
// collide, and the first file's (the hub's) is the current context.
func (d *demo) kubeconfig() string {
	paths := []string{d.fl.HubPlane.KubeconfigPath}
	for _, m := range d.members {
		paths = append(paths, m.Plane.KubeconfigPath)
	}
	return strings.Join(paths, string(os.PathListSeparator))
}

func (d *demo) cleanup() error {
	if d.fl == nil {
		return nil
	}
	return errors.Join(d.fl.Close(), os.RemoveAll(d.fl.Dir))
}

// poll waits for cond, saying what it waits for if it takes a while.
func (d *demo) poll(ctx context.Context, what string, cond wait.ConditionWithContextFunc) error {
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, stepTimeout, true, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func (d *demo) allMembers(reason string) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) { return d.fl.AllReady(ctx, reason, d.members...), nil }
}

func (d *demo) memberReason(name, reason string) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) { return d.fl.AllReady(ctx, reason, d.fl.Member(name)), nil }
}

func (d *demo) fleetReady(ctx context.Context) (bool, error) {
	f, err := d.fl.GetFleet(ctx)
	if err != nil {
		return false, nil
	}
	bundles, err := samples()
	if err != nil {
		return false, err
	}
	want := int64(len(d.members)*len(bundles) + d.placed)
	return meta.IsStatusConditionTrue(f.Status.Conditions, hubv1alpha1.ReadyCondition) && f.Status.Bundles.Ready == want && f.Status.Bundles.Total == want, nil
}

// table prints a resource of the hub as `kubectl get` does, from the API server's own table.
func (d *demo) table(ctx context.Context, resource string) error {
	cs, err := kubernetes.NewForConfig(d.fl.HubPlane.Config)
	if err != nil {
		return err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/apis/hub.configbundle.dev/v1alpha1/"+resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("reading %s: %w", resource, err)
	}
	t := &metav1.Table{}
	if err := json.Unmarshal(raw, t); err != nil {
		return err
	}
	return printTable(d.out, t)
}
