package placement

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/rollout"
)

// What a rollout that judges or restarts the workloads reading a bundle (spec.rollout.workloads
// Observe or Restart) needs in each member: reading Deployments, StatefulSets and DaemonSets,
// and patching their pod template's restart annotation.
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch

// workloadWatches watches the apps/v1 workloads of the namespaces of members where a FleetBundle
// with spec.rollout.workloads Observe or Restart places its bundle, and only those: a member
// with no such FleetBundle costs nothing. A watch starts when a FleetBundle first needs it (use)
// and stops when none does any longer (release). mu guards watches; it is never held across a
// call to an API server.
type workloadWatches struct {
	mu      sync.Mutex
	watches map[watchKey]*namespaceWatch
	// changed is told of every change of a watched workload, with the FleetBundles that use
	// the watch.
	changed func(member string, users []types.NamespacedName)
}

// watchKey is a member and one of its namespaces.
type watchKey struct {
	member, namespace string
}

// namespaceWatch is the informers of one namespace of one member.
type namespaceWatch struct {
	// cluster is the member's cluster it reads: a member connected anew gets a new watch.
	cluster cluster.Cluster
	// users are the FleetBundles that need it.
	users map[types.NamespacedName]bool
	stop  chan struct{}

	deployments, statefulSets, daemonSets cache.SharedIndexInformer

	// errMu guards err, the last error of a list or watch, until one succeeds.
	errMu sync.Mutex
	err   error
}

func newWorkloadWatches(changed func(string, []types.NamespacedName)) *workloadWatches {
	return &workloadWatches{watches: map[watchKey]*namespaceWatch{}, changed: changed}
}

// use returns the watch of a member's namespace for FleetBundle fb, started if it is not.
func (ws *workloadWatches) use(member string, cl cluster.Cluster, namespace string, fb types.NamespacedName) (*namespaceWatch, error) {
	key := watchKey{member: member, namespace: namespace}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.watches[key]
	if w != nil && w.cluster != cl { // the member connected anew
		close(w.stop)
		w = nil
	}
	if w == nil {
		var err error
		if w, err = ws.start(key, cl); err != nil {
			delete(ws.watches, key)
			return nil, err
		}
		ws.watches[key] = w
	}
	w.users[fb] = true
	return w, nil
}

// start starts the informers of a member's namespace.
func (ws *workloadWatches) start(key watchKey, cl cluster.Cluster) (*namespaceWatch, error) {
	cs, err := kubernetes.NewForConfig(cl.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("watching the workloads of member %s: %w", key.member, err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(key.namespace),
		informers.WithTransform(stripManagedFields))
	w := &namespaceWatch{cluster: cl, users: map[types.NamespacedName]bool{}, stop: make(chan struct{}),
		deployments: factory.Apps().V1().Deployments().Informer(), statefulSets: factory.Apps().V1().StatefulSets().Informer(),
		daemonSets: factory.Apps().V1().DaemonSets().Informer()}
	notify := func(any) { ws.notify(key) }
	for _, inf := range []cache.SharedIndexInformer{w.deployments, w.statefulSets, w.daemonSets} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: notify,
			UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify}); err != nil {
			return nil, fmt.Errorf("watching the workloads of member %s: %w", key.member, err)
		}
		if err := inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { w.setErr(err) }); err != nil {
			return nil, fmt.Errorf("watching the workloads of member %s: %w", key.member, err)
		}
	}
	factory.Start(w.stop)
	return w, nil
}

// notify tells changed of a change in a watched namespace.
func (ws *workloadWatches) notify(key watchKey) {
	ws.mu.Lock()
	w := ws.watches[key]
	var users []types.NamespacedName
	if w != nil {
		for fb := range w.users {
			users = append(users, fb)
		}
	}
	ws.mu.Unlock()
	if len(users) > 0 {
		ws.changed(key.member, users)
	}
}

// release says that FleetBundle fb no longer needs the watch of a member's namespace; a watch
// nobody needs stops.
func (ws *workloadWatches) release(member, namespace string, fb types.NamespacedName) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.releaseLocked(watchKey{member: member, namespace: namespace}, fb)
}

// keepOnly releases the watches FleetBundle fb uses in the members not in keep.
func (ws *workloadWatches) keepOnly(fb types.NamespacedName, keep map[string]bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for key, w := range ws.watches {
		if key.namespace == fb.Namespace && w.users[fb] && !keep[key.member] {
			ws.releaseLocked(key, fb)
		}
	}
}

func (ws *workloadWatches) releaseLocked(key watchKey, fb types.NamespacedName) {
	w := ws.watches[key]
	if w == nil {
		return
	}
	delete(w.users, fb)
	if len(w.users) == 0 {
		close(w.stop)
		delete(ws.watches, key)
	}
}

// NeedLeaderElection is false: every replica that runs placement stops its watches.
func (ws *workloadWatches) NeedLeaderElection() bool { return false }

// Start runs until ctx ends, then stops every watch: the manager runs it.
func (ws *workloadWatches) Start(ctx context.Context) error {
	<-ctx.Done()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for key, w := range ws.watches {
		close(w.stop)
		delete(ws.watches, key)
	}
	return nil
}

func (w *namespaceWatch) setErr(err error) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	w.err = err
}

// consumers returns the workloads of the watched namespace that read target, and where they
// stand; not Known until every informer listed them.
func (w *namespaceWatch) consumers(target rollout.Target) rollout.Workloads {
	if !w.deployments.HasSynced() || !w.statefulSets.HasSynced() || !w.daemonSets.HasSynced() {
		w.errMu.Lock()
		defer w.errMu.Unlock()
		out := rollout.Workloads{}
		if w.err != nil {
			out.Problem = "listing its workloads failed: " + w.err.Error()
		}
		return out
	}
	out := rollout.Workloads{Known: true}
	for _, o := range w.deployments.GetStore().List() {
		if d, ok := o.(*appsv1.Deployment); ok && rollout.Reads(&d.Spec.Template.Spec, target) {
			out.Consumers = append(out.Consumers, rollout.DeploymentConsumer(d))
		}
	}
	for _, o := range w.statefulSets.GetStore().List() {
		if s, ok := o.(*appsv1.StatefulSet); ok && rollout.Reads(&s.Spec.Template.Spec, target) {
			out.Consumers = append(out.Consumers, rollout.StatefulSetConsumer(s))
		}
	}
	for _, o := range w.daemonSets.GetStore().List() {
		if d, ok := o.(*appsv1.DaemonSet); ok && rollout.Reads(&d.Spec.Template.Spec, target) {
			out.Consumers = append(out.Consumers, rollout.DaemonSetConsumer(d))
		}
	}
	return out
}

// stripManagedFields drops the managed fields of what the informers keep: never read.
func stripManagedFields(o any) (any, error) {
	if m, err := meta.Accessor(o); err == nil {
		m.SetManagedFields(nil)
	}
	return o, nil
}

// targetOf is what a FleetBundle's placed bundle writes in its member: a ConfigMap of its name.
func targetOf(fb *hubv1alpha1.FleetBundle) rollout.Target {
	return rollout.Target{Name: fb.Name}
}

// workloadsOf returns where the consumers of FleetBundle fb's bundle in a member stand, the
// member's namespace watched from now on; nil if its rollout does not judge workloads, and the
// watch released.
func (ws *workloadWatches) workloadsOf(ctx context.Context, member string, cl cluster.Cluster, fb *hubv1alpha1.FleetBundle) *rollout.Workloads {
	key := client.ObjectKeyFromObject(fb)
	if !rollout.JudgesWorkloads(fb.Spec.Rollout) || !fb.DeletionTimestamp.IsZero() {
		ws.release(member, fb.Namespace, key)
		return nil
	}
	w, err := ws.use(member, cl, fb.Namespace, key)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Watching workloads failed", "cluster", member)
		return &rollout.Workloads{Problem: err.Error()}
	}
	out := w.consumers(targetOf(fb))
	return &out
}

// restartPatch is the merge patch that restarts a workload for revision.
func restartPatch(revision int64) []byte {
	return fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`,
		hubv1alpha1.RestartedForAnnotation, strconv.FormatInt(revision, 10))
}

// workloadObject is an empty object of a consumer's kind and name, to patch.
func workloadObject(c rollout.Consumer, namespace string) (client.Object, error) {
	var o client.Object
	switch c.Kind {
	case rollout.DeploymentKind:
		o = &appsv1.Deployment{}
	case rollout.StatefulSetKind:
		o = &appsv1.StatefulSet{}
	case rollout.DaemonSetKind:
		o = &appsv1.DaemonSet{}
	default:
		return nil, errors.New("unknown workload kind " + c.Kind)
	}
	o.SetNamespace(namespace)
	o.SetName(c.Name)
	return o, nil
}
