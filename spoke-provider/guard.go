package spokeprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// GuardState is what the provider knows of the hub's admission policies in a member
// (Options.InstallGuard): the Guarded condition of its MemberCluster.
type GuardState struct {
	// Status is True while both policies and their bindings are in place, False where they
	// cannot be (Reason GuardUnavailable or GuardFailed), Unknown before the hub connected.
	Status metav1.ConditionStatus
	// Reason and Message explain Status (hubv1alpha1.GuardInstalledReason, ...).
	Reason, Message string
}

// guardPending is the GuardState of a member the hub has not connected to yet.
var guardPending = GuardState{Status: metav1.ConditionUnknown, Reason: hubv1alpha1.GuardPendingReason, Message: "Not connected yet"}

// guardObject is one object the hub keeps in a member: a policy or a binding.
type guardObject struct {
	resource string // validatingadmissionpolicies, validatingadmissionpolicybindings
	want     runtime.Object
	name     string
}

// key names the object in logs, messages and the maps of guardWatch.
func (o guardObject) key() string {
	return o.resource + "/" + o.name
}

// guardWatch is a connection's watch of the hub's admission policies and bindings in its
// member: one informer per object, restricted to its name (RBAC matches the field selector
// metadata.name against resourceNames), through the connection's HTTP client. Every event of
// it, and every error of its watch, has the member's CRDs and guard kept again.
type guardWatch struct {
	client  kubernetes.Interface
	user    string // the hub's identity in the member
	objects []guardObject

	informers map[string]toolscache.SharedIndexInformer // by key

	// mu guards the fields below; it is never held across a network call.
	mu sync.Mutex
	// watchErrs holds, by key, the last error of the object's watch.
	watchErrs map[string]error
	// applied holds, by key, the uid and generation of the object as the hub last applied it:
	// one still differing at that generation is not applied again (one write per change).
	applied map[string]appliedCRD
	// known holds the keys of the objects the hub has seen or applied on this connection: one
	// applied again was restored.
	known map[string]bool
}

// dialGuard learns the hub's identity in the member (a SelfSubjectReview) and starts the watch
// of its admission policies, which runs until connCtx ends; it waits (within ctx) until each
// object's watch has listed it or failed to. A member that does not serve
// ValidatingAdmissionPolicies gets no watch, and the GuardState that says so.
func (p *Provider) dialGuard(ctx, connCtx context.Context, conn *connection, cfg *rest.Config, httpClient *http.Client) (*guardWatch, GuardState) {
	switch served, err := servesGuard(conn.disc); {
	case err != nil:
		return nil, GuardState{Status: metav1.ConditionFalse, Reason: hubv1alpha1.GuardFailedReason,
			Message: fmt.Sprintf("Reading whether the member serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy failed: %v", err)}
	case !served:
		return nil, GuardState{Status: metav1.ConditionFalse, Reason: hubv1alpha1.GuardUnavailableReason,
			Message: "The member's API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy: nothing refuses a change of a guarded ConfigMap or Secret there, whose ConfigBundles are healed as with driftPolicy Heal"}
	}
	user, err := conn.whoAmI(ctx)
	if err != nil {
		return nil, GuardState{Status: metav1.ConditionFalse, Reason: hubv1alpha1.GuardFailedReason,
			Message: fmt.Sprintf("The hub could not learn its own identity in the member (a SelfSubjectReview), which its admission policies let through: %v", err)}
	}
	cs, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, GuardState{Status: metav1.ConditionFalse, Reason: hubv1alpha1.GuardFailedReason, Message: err.Error()}
	}
	w := &guardWatch{client: cs, user: user, informers: map[string]toolscache.SharedIndexInformer{},
		watchErrs: map[string]error{}, applied: map[string]appliedCRD{}, known: map[string]bool{}}
	policies, bindings := GuardPolicies(user)
	for _, pol := range policies {
		w.objects = append(w.objects, guardObject{resource: "validatingadmissionpolicies", want: pol, name: pol.Name})
	}
	for _, b := range bindings {
		w.objects = append(w.objects, guardObject{resource: "validatingadmissionpolicybindings", want: b, name: b.Name})
	}
	for _, o := range w.objects {
		w.informers[o.key()] = p.startGuardInformer(connCtx, w, conn.name, o)
	}
	_ = wait.PollUntilContextCancel(ctx, crdWatchPoll, true, func(context.Context) (bool, error) { return w.settled(), nil })
	return w, GuardState{Status: metav1.ConditionUnknown, Reason: hubv1alpha1.GuardPendingReason, Message: "Installing the hub's admission policies"}
}

// startGuardInformer starts the informer of one object, by name, whose events and errors have
// the member's guard kept.
func (p *Provider) startGuardInformer(ctx context.Context, w *guardWatch, name string, o guardObject) toolscache.SharedIndexInformer {
	lw := toolscache.NewListWatchFromClient(w.client.AdmissionregistrationV1().RESTClient(), o.resource, metav1.NamespaceAll,
		fields.OneTermEqualSelector("metadata.name", o.name))
	inf := toolscache.NewSharedIndexInformer(lw, o.want.DeepCopyObject(), 0, toolscache.Indexers{})
	key := o.key()
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *toolscache.Reflector, err error) {
		w.mu.Lock()
		w.watchErrs[key] = err
		w.mu.Unlock()
		p.enqueueCRDs(name)
	})
	enqueue := func(any) { p.enqueueCRDs(name) }
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue})
	go inf.RunWithContext(ctx)
	return inf
}

// settled reports whether every object's watch has listed it or failed to.
func (w *guardWatch) settled() bool {
	for _, o := range w.objects {
		if _, synced, err := w.observe(o); !synced && err == nil {
			return false
		}
	}
	return true
}

// observe returns the object as the watch has it (nil: absent), whether its first list is
// done, and the error of its watch while it has not listed it.
func (w *guardWatch) observe(o guardObject) (runtime.Object, bool, error) {
	inf := w.informers[o.key()]
	synced := inf.HasSynced()
	w.mu.Lock()
	watchErr := w.watchErrs[o.key()]
	if synced {
		watchErr = nil
	}
	w.mu.Unlock()
	obj, exists, err := inf.GetStore().GetByKey(o.name)
	if err != nil || !exists {
		return nil, synced, watchErr
	}
	live, _ := obj.(runtime.Object)
	return live, synced, watchErr
}

// servesGuard reports, from discovery, whether the member serves ValidatingAdmissionPolicies and
// their bindings in admissionregistration.k8s.io/v1.
func servesGuard(disc discovery.DiscoveryInterface) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	has := func(name string) bool {
		return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == name })
	}
	return has("validatingadmissionpolicies") && has("validatingadmissionpolicybindings"), nil
}

// whoAmI returns the user name the member authenticates the hub's credential as.
func (c *connection) whoAmI(ctx context.Context) (string, error) {
	review := &authenticationv1.SelfSubjectReview{
		TypeMeta: metav1.TypeMeta{APIVersion: authenticationv1.SchemeGroupVersion.String(), Kind: "SelfSubjectReview"},
	}
	if err := c.createIn(ctx, authenticationv1.GroupName, "selfsubjectreviews", review); err != nil {
		return "", err
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("the SelfSubjectReview names no user")
	}
	return review.Status.UserInfo.Username, nil
}

// guardVerdict is what keepGuard found and did.
type guardVerdict struct {
	state    GuardState
	restored []string // the objects applied again after someone changed or deleted them
	retry    bool     // keep it again after the probe interval: a write failed, or the fence refused it
	pending  bool     // a watch has not listed its object yet: the state stays as it is
}

// keepGuard keeps the hub's admission policies and bindings in a member (Options.InstallGuard)
// from what the watch of them sees: it applies each one that is missing or differs (one write
// per change, through the member's fence) and says whether they are all in place.
func (p *Provider) keepGuard(ctx context.Context, conn *connection) guardVerdict {
	w := conn.guard
	if w == nil {
		return guardVerdict{state: conn.guardState}
	}
	v := guardVerdict{state: GuardState{Status: metav1.ConditionTrue, Reason: hubv1alpha1.GuardInstalledReason,
		Message: fmt.Sprintf("The admission policies %s and %s are in place; the hub acts as %s", hubv1alpha1.GuardPolicyName, hubv1alpha1.TakeOverPolicyName, w.user)}}
	var failed []string
	for _, o := range w.objects {
		restored, failure := p.keepGuardObject(ctx, conn, o, &v)
		if restored {
			v.restored = append(v.restored, o.key())
		}
		if failure != "" {
			failed = append(failed, failure)
		}
	}
	if len(failed) > 0 {
		v.state = GuardState{Status: metav1.ConditionFalse, Reason: hubv1alpha1.GuardFailedReason, Message: strings.Join(failed, "; ")}
	}
	return v
}

// keepGuardObject applies one object where the member's copy is missing or differs. It reports
// whether it restored one the hub had seen, and what failed.
func (p *Provider) keepGuardObject(ctx context.Context, conn *connection, o guardObject, v *guardVerdict) (bool, string) {
	w := conn.guard
	live, synced, watchErr := w.observe(o)
	switch {
	case watchErr != nil:
		return false, fmt.Sprintf("the hub cannot watch %s (register the member again to grant list and watch of it): %v", o.key(), watchErr)
	case !synced:
		v.pending = true
		return false, ""
	case live != nil && sameGuardSpec(o.want, live):
		w.remember(o)
		return false, ""
	case live != nil && w.appliedAt(o, live):
		return false, fmt.Sprintf("%s differs from the hub's although the hub applied it: the member's API server defaults it otherwise", o.key())
	case !p.opts.Replica.MayWrite(conn.name):
		v.retry, v.pending = true, true
		return false, ""
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	out, err := w.write(ctx, o, live, p.opts.FieldOwner)
	switch {
	case apierrors.IsConflict(err):
		v.retry, v.pending = true, true // changed meanwhile: its watch brings the change
		return false, ""
	case err != nil:
		v.retry = true
		return false, fmt.Sprintf("the hub could not write %s (register the member again to grant create, patch and update of it): %v", o.key(), err)
	}
	restored := w.knows(o)
	w.remember(o)
	w.mu.Lock()
	w.applied[o.key()] = appliedCRD{uid: objectMeta(out).UID, generation: objectMeta(out).Generation}
	w.mu.Unlock()
	return restored, ""
}

// sameGuardSpec reports whether the member's copy of an object has the spec the hub wants.
func sameGuardSpec(want, live runtime.Object) bool {
	switch w := want.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		l, ok := live.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		return ok && equality.Semantic.DeepEqual(w.Spec, l.Spec)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		l, ok := live.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
		return ok && equality.Semantic.DeepEqual(w.Spec, l.Spec)
	}
	return false
}

// objectMeta is the metadata of a policy or a binding.
func objectMeta(obj runtime.Object) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		return &o.ObjectMeta
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		return &o.ObjectMeta
	}
	return &metav1.ObjectMeta{}
}

// remember notes that the hub has seen or applied o on this connection.
func (w *guardWatch) remember(o guardObject) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known[o.key()] = true
}

// knows reports whether the hub has seen or applied o on this connection.
func (w *guardWatch) knows(o guardObject) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.known[o.key()]
}

// appliedAt reports whether the hub last applied the object at live's uid and generation.
func (w *guardWatch) appliedAt(o guardObject, live runtime.Object) bool {
	m := objectMeta(live)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.applied[o.key()] == appliedCRD{uid: m.UID, generation: m.Generation}
}

// write writes the hub's object through the watch's fenced client, as fieldOwner: where the
// member has none (live nil), a server-side apply that creates it (RBAC grants a create by name
// only so) and never replaces one (the precondition impossibleResourceVersion: one the watch
// has not seen yet is a conflict); otherwise an update of live's spec, at live's resourceVersion, that replaces it
// whole (an apply would keep the entries of the sets another manager added, such as a
// binding's validationActions).
func (w *guardWatch) write(ctx context.Context, o guardObject, live runtime.Object, fieldOwner string) (runtime.Object, error) {
	api := w.client.AdmissionregistrationV1()
	if live == nil {
		want := o.want.DeepCopyObject()
		objectMeta(want).ResourceVersion = impossibleResourceVersion
		body, err := json.Marshal(want)
		if err != nil {
			return nil, err
		}
		opts := metav1.PatchOptions{FieldManager: fieldOwner, Force: ptr.To(true)}
		if _, ok := o.want.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
			return api.ValidatingAdmissionPolicies().Patch(ctx, o.name, types.ApplyPatchType, body, opts)
		}
		return api.ValidatingAdmissionPolicyBindings().Patch(ctx, o.name, types.ApplyPatchType, body, opts)
	}
	opts := metav1.UpdateOptions{FieldManager: fieldOwner}
	switch want := o.want.(type) {
	case *admissionregistrationv1.ValidatingAdmissionPolicy:
		updated := live.(*admissionregistrationv1.ValidatingAdmissionPolicy).DeepCopy()
		updated.Spec = *want.Spec.DeepCopy()
		return api.ValidatingAdmissionPolicies().Update(ctx, updated, opts)
	case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
		updated := live.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding).DeepCopy()
		updated.Spec = *want.Spec.DeepCopy()
		return api.ValidatingAdmissionPolicyBindings().Update(ctx, updated, opts)
	}
	return nil, fmt.Errorf("%s: not a kind the hub keeps", o.key())
}

// publishGuard publishes what keepGuard found in the member's State, if conn is still its
// active connection, and records a GuardRestored Event for each object restored.
func (p *Provider) publishGuard(ctx context.Context, name string, conn *connection, v guardVerdict) {
	log := p.log.WithValues("cluster", name)
	for _, key := range v.restored {
		log.Info("Member admission policy restored", "object", key)
		p.recordMemberEvent(ctx, name, corev1.EventTypeNormal, hubv1alpha1.GuardRestoredEvent, "RestoreGuard",
			"Member %s: %s was changed or deleted; the hub applied its own again", name, key)
	}
	if v.pending && v.state.Status == metav1.ConditionTrue {
		return // not all listed yet, or waiting for the fence: the state stays as it is
	}
	if p.setGuard(name, conn, v.state) {
		log.Info("Member guard changed", "status", v.state.Status, "reason", v.state.Reason, "message", v.state.Message)
		p.notifyChanged(name)
	}
}

// setGuard records the guard state of a member's active connection conn; it reports whether the
// published state changed.
func (p *Provider) setGuard(name string, conn *connection, state GuardState) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, known := p.members[name]
	if !known || m.active != conn || m.state.Guard == state {
		return false
	}
	m.state.Guard = state
	return true
}
