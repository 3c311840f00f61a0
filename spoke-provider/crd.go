package spokeprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// crdWatch is a connection's watch of the member's CRDs (Options.CRDs): one informer per CRD,
// restricted to its name (RBAC matches the field selector metadata.name against the
// resourceNames of the hub's role), through the connection's HTTP client. It costs one watch
// per CRD and no request in steady state. Every event of it, and every error of its watch,
// has the member's CRDs kept again (keepCRDs).
type crdWatch struct {
	client    apiextensionsclient.Interface
	informers map[string]toolscache.SharedIndexInformer // by CRD name

	// mu guards the fields below; it is never held across a network call.
	mu sync.Mutex
	// watchErrs holds, by CRD name, the last error of the CRD's watch and the resourceVersion
	// the informer had synced to then: the error stands until the informer syncs further.
	watchErrs map[string]watchError
	// applied holds, by CRD name, the CRD as the hub last applied it (uid, generation): a CRD
	// still differing at that very generation is not applied again (one write per drift).
	applied map[string]appliedCRD
}

type watchError struct {
	err error
	rv  string
}

type appliedCRD struct {
	uid        types.UID
	generation int64
}

// watchCRDs starts a watch of the member's CRDs on the connection, which runs until connCtx
// ends, and waits (within ctx) until each has listed its CRD or failed to: then the watch,
// where it works, is what says whether the member serves them. Its events enqueue the member
// for keepCRDs. cfg is the member's (fenced) config and httpClient the HTTP client of its
// cluster.
func (p *Provider) watchCRDs(ctx, connCtx context.Context, name string, cfg *rest.Config, httpClient *http.Client) (*crdWatch, error) {
	cs, err := apiextensionsclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	w := &crdWatch{client: cs, informers: map[string]toolscache.SharedIndexInformer{},
		watchErrs: map[string]watchError{}, applied: map[string]appliedCRD{}}
	enqueue := func(any) { p.enqueueCRDs(name) }
	for _, crd := range p.opts.CRDs {
		lw := toolscache.NewListWatchFromClient(cs.ApiextensionsV1().RESTClient(), "customresourcedefinitions", metav1.NamespaceAll,
			fields.OneTermEqualSelector("metadata.name", crd.Name))
		inf := toolscache.NewSharedIndexInformer(lw, &apiextensionsv1.CustomResourceDefinition{}, 0, toolscache.Indexers{})
		crdName := crd.Name
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, r *toolscache.Reflector, err error) {
			w.watchFailed(crdName, err, r.LastSyncResourceVersion())
			p.enqueueCRDs(name)
		}); err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
		}); err != nil {
			return nil, err
		}
		w.informers[crd.Name] = inf
		go inf.RunWithContext(connCtx)
	}
	if err := wait.PollUntilContextCancel(ctx, crdWatchPoll, true, func(context.Context) (bool, error) { return w.settled(), nil }); err != nil {
		return nil, fmt.Errorf("watching the CRDs: %w", err)
	}
	return w, nil
}

// crdWatchPoll is how often watchCRDs looks whether the watches have listed their CRDs.
const crdWatchPoll = 20 * time.Millisecond

// settled reports whether every CRD's watch has listed it or failed to.
func (w *crdWatch) settled() bool {
	for crd := range w.informers {
		if _, synced, err := w.observe(crd); !synced && err == nil {
			return false
		}
	}
	return true
}

// watchFailed records an error of a CRD's watch, which the informer had synced to rv then.
func (w *crdWatch) watchFailed(crd string, err error, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watchErrs[crd] = watchError{err: err, rv: rv}
}

// observe returns the CRD as the watch has it (nil: absent), whether its first list is done,
// and the error of its watch, if it fails still.
func (w *crdWatch) observe(crd string) (*apiextensionsv1.CustomResourceDefinition, bool, error) {
	inf := w.informers[crd]
	var watchErr error
	w.mu.Lock()
	if e, ok := w.watchErrs[crd]; ok && e.rv == inf.LastSyncResourceVersion() {
		watchErr = e.err
	} else {
		delete(w.watchErrs, crd)
	}
	w.mu.Unlock()
	obj, exists, err := inf.GetStore().GetByKey(crd)
	if err != nil || !exists {
		return nil, inf.HasSynced(), watchErr
	}
	live, _ := obj.(*apiextensionsv1.CustomResourceDefinition)
	return live, inf.HasSynced(), watchErr
}

// synced reports whether every CRD's watch has listed it and works: the watch, not the probes'
// discovery, then says whether the member serves them. A nil crdWatch is not synced.
func (w *crdWatch) synced() bool {
	if w == nil {
		return false
	}
	for crd := range w.informers {
		if _, synced, err := w.observe(crd); !synced || err != nil {
			return false
		}
	}
	return true
}

// appliedAt reports whether the hub last applied the CRD at live's uid and generation.
func (w *crdWatch) appliedAt(live *apiextensionsv1.CustomResourceDefinition) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.applied[live.Name] == appliedCRD{uid: live.UID, generation: live.Generation}
}

// apply applies the hub's CRD over the member's copy at resourceVersion rv (applyCRD), through
// the watch's fenced client, and records what it became.
func (w *crdWatch) apply(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, fieldOwner, rv string) error {
	out, err := applyCRD(ctx, w.client, crd, fieldOwner, rv)
	if err != nil {
		return err
	}
	w.recordApplied(out)
	return nil
}

// create creates the hub's CRD where the member has none (createCRD), through the watch's
// fenced client, and records what it became.
func (w *crdWatch) create(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, fieldOwner string) error {
	out, err := createCRD(ctx, w.client, crd, fieldOwner)
	if err != nil || out == nil {
		return err
	}
	w.recordApplied(out)
	return nil
}

func (w *crdWatch) recordApplied(out *apiextensionsv1.CustomResourceDefinition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applied[out.Name] = appliedCRD{uid: out.UID, generation: out.Generation}
}

// impossibleResourceVersion is a resourceVersion no object ever has (the largest an API server
// parses): the precondition of createCRD, which no existing CRD meets.
const impossibleResourceVersion = "18446744073709551615"

// applyCRD applies the hub's CRD, stamped with this build's revision (MemberCRDRevision), with
// cs (server-side apply, forced, as fieldOwner) over the member's copy at resourceVersion rv,
// and returns what it became. The copy changed since it was read fails it with a conflict
// (apierrors.IsConflict) rather than being overwritten: another hub may have applied its own.
// cs must be fenced (Provider.fenced): every apply is.
func applyCRD(ctx context.Context, cs apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition, fieldOwner, rv string) (*apiextensionsv1.CustomResourceDefinition, error) {
	out, err := patchCRD(ctx, cs, crd, fieldOwner, rv)
	if err != nil {
		return nil, fmt.Errorf("applying CRD %s: %w", crd.Name, err)
	}
	return out, nil
}

// createCRD creates the hub's CRD, stamped with this build's revision, in a member that has
// none, and never replaces one: a server-side apply whose resourceVersion precondition
// (impossibleResourceVersion) no existing CRD meets, so that it creates the CRD or fails. A CRD
// made meanwhile by someone else (another hub, say) is theirs: createCRD returns nil and no
// error then. It is the one write to a member that may leave unfenced, when the replica joins
// the member, before it can hold the member's fence.
func createCRD(ctx context.Context, cs apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition, fieldOwner string) (*apiextensionsv1.CustomResourceDefinition, error) {
	out, err := patchCRD(ctx, cs, crd, fieldOwner, impossibleResourceVersion)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return nil, nil // someone else made it
	case err != nil:
		return nil, fmt.Errorf("creating CRD %s: %w", crd.Name, err)
	}
	return out, nil
}

// patchCRD applies crd stamped with this build's revision (CRDRevisionAnnotation) with cs
// (server-side apply, forced, as fieldOwner) over the member's copy at resourceVersion rv.
func patchCRD(ctx context.Context, cs apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition, fieldOwner, rv string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd = crd.DeepCopy()
	crd.APIVersion, crd.Kind = apiextensionsv1.SchemeGroupVersion.String(), "CustomResourceDefinition"
	crd.ResourceVersion, crd.UID, crd.ManagedFields, crd.Status = rv, "", nil, apiextensionsv1.CustomResourceDefinitionStatus{}
	if crd.Annotations == nil {
		crd.Annotations = map[string]string{}
	}
	crd.Annotations[hubv1alpha1.CRDRevisionAnnotation] = strconv.Itoa(hubv1alpha1.MemberCRDRevision)
	body, err := json.Marshal(crd)
	if err != nil {
		return nil, err
	}
	return cs.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldOwner, Force: ptr.To(true)})
}

// crdRevision returns the revision of a member's CRD (CRDRevisionAnnotation): 0, older than any,
// where it has none or one that is no revision.
func crdRevision(crd *apiextensionsv1.CustomResourceDefinition) int {
	rev, err := strconv.Atoi(crd.Annotations[hubv1alpha1.CRDRevisionAnnotation])
	if err != nil || rev < 0 {
		return 0
	}
	return rev
}

// newerCRD says that a member's CRD is newer than the one this build embeds, which the hub
// then leaves alone (CRDNewer), or "" if it is not.
func newerCRD(live *apiextensionsv1.CustomResourceDefinition) string {
	rev := crdRevision(live)
	if rev <= hubv1alpha1.MemberCRDRevision {
		return ""
	}
	return fmt.Sprintf("its CRD %s is at revision %d, newer than this hub's %d: a newer hub applied it, and this hub leaves it alone",
		live.Name, rev, hubv1alpha1.MemberCRDRevision)
}

// crdVerdict is what keepCRD found of one CRD in a member, and did.
type crdVerdict struct {
	missing  string // why the CRD counts as missing (deleted); "" if it is served
	newer    string // that its revision is higher than this build's (CRDNewer), left alone; "" if not
	note     string // what the member's Ready message says of it while served
	restored string // what differed from the hub's CRD, which the hub applied again
	upgraded bool   // the CRD's revision was lower than this build's, and the hub applied its own
	from     int    // the revision it was at (0: none)
	retry    bool   // keep it again after the probe interval: a write failed, or the fence refused it
}

// keepMember is the Reconcile of the member-crds controller: it keeps a member's CRDs
// (keepCRDs) and its admission policies (keepGuard).
func (p *Provider) keepMember(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	retry := p.keepCRDs(ctx, req)
	if conn := p.activeConnection(req.Name); conn != nil && p.opts.InstallGuard {
		v := p.keepGuard(ctx, conn)
		p.publishGuard(ctx, req.Name, conn, v)
		retry = retry || v.retry
	}
	if retry {
		return reconcile.Result{RequeueAfter: p.opts.ProbeInterval}, nil
	}
	return reconcile.Result{}, nil
}

// keepCRDs keeps one member's CRDs as Options.CRDs has them, from what the member's watch of
// them sees (one request only when one differs, is older or is gone: the write), and publishes
// what it found in the member's State:
// CRDMissing while one is gone or being deleted, CRDNewer while one is newer than this build's
// (left alone), a note in the Ready message where the hub may not keep one (or could not apply
// them when it connected: connection.crdNote). Every write goes through the member's fence: one
// the fence refuses waits, and is tried again after the probe interval. Every CRD restored is a
// CRDRestored Event, every deletion a CRDDeleted one. It reports whether to keep them again
// after the probe interval.
func (p *Provider) keepCRDs(ctx context.Context, req reconcile.Request) (retry bool) {
	name := req.Name
	conn := p.activeConnection(name)
	if conn == nil || conn.crds == nil {
		return false // not connected: connecting makes sure of the CRDs
	}
	var missing, newer, notes []string
	if conn.crdNote != "" {
		notes = append(notes, conn.crdNote)
	}
	var verdicts []crdVerdict
	for _, want := range p.opts.CRDs {
		v := p.keepCRD(ctx, conn, want)
		verdicts = append(verdicts, v)
		if v.missing != "" {
			missing = append(missing, v.missing)
		}
		if v.newer != "" {
			newer = append(newer, v.newer)
		}
		if v.note != "" {
			notes = append(notes, v.note)
		}
		retry = retry || v.retry
	}
	p.publishCRDs(ctx, name, conn, strings.Join(missing, "; "), strings.Join(newer, "; "), strings.Join(notes, "; "), verdicts)
	return retry
}

// keepCRD keeps one CRD of a member: it installs it again when it is gone (with InstallCRDs),
// leaves it alone when its revision is higher than this build's, and otherwise restores it when
// it differs from want or upgrades it when its revision is lower. A CRD missing on a connection
// was deleted: joining made sure it was served.
func (p *Provider) keepCRD(ctx context.Context, conn *connection, want *apiextensionsv1.CustomResourceDefinition) crdVerdict {
	live, synced, watchErr := conn.crds.observe(want.Name)
	switch {
	case watchErr != nil && !synced:
		return crdVerdict{note: fmt.Sprintf("the hub cannot watch its CRD %s, so a change of it goes unnoticed and its deletion "+
			"is seen by the probes only (register the member again to grant list and watch of customresourcedefinitions named %s): %v",
			want.Name, want.Name, watchErr)}
	case !synced:
		return crdVerdict{} // its first list is on its way; its events will come
	case live == nil || !live.DeletionTimestamp.IsZero() || !established(live):
		return p.reinstallCRD(ctx, conn, want, live)
	case newerCRD(live) != "":
		return crdVerdict{newer: newerCRD(live)}
	}
	return p.restoreCRD(ctx, conn, want, live)
}

// reinstallCRD installs want again (with InstallCRDs) once the member's copy (live, nil if none)
// is gone. Deleted, being deleted, or reinstalled and not served yet, it says so in one message
// for all three, so that the member says it once; a copy whose names the member rejects, which
// the hub leaves alone, says that. It creates the CRD only (createCRD: one made meanwhile is left
// alone), fenced.
func (p *Provider) reinstallCRD(ctx context.Context, conn *connection, want, live *apiextensionsv1.CustomResourceDefinition) crdVerdict {
	v := crdVerdict{missing: fmt.Sprintf("The member's CRD %s was deleted, and every ConfigBundle with it", want.Name)}
	switch {
	case live != nil && live.DeletionTimestamp.IsZero() && namesRejected(live) != "":
		v.missing += fmt.Sprintf("; it is back but not established, its names rejected (%s)", namesRejected(live))
		return v
	case !p.opts.InstallCRDs:
		v.missing += "; the hub does not install CRDs (--install-crds=false)"
		return v
	case live != nil: // being deleted, or not served yet
		v.missing += "; the hub reinstalls it"
		return v
	case !p.opts.Replica.MayWrite(conn.name):
		v.missing += "; the hub reinstalls it once this replica may write to the member again (its fence)"
		v.retry = true
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	if err := conn.crds.create(ctx, want, p.opts.FieldOwner); err != nil {
		v.missing += fmt.Sprintf("; reinstalling it failed (it needs create on customresourcedefinitions named %s): %v", want.Name, err)
		v.retry = true
		return v
	}
	v.missing += "; the hub reinstalls it"
	return v
}

// restoreCRD applies want again (with InstallCRDs) where the member's served copy, live, differs
// from it, once per change, or where live's revision is lower than this build's (an upgrade),
// over live's resourceVersion and through the member's fence: a change meanwhile (a conflict)
// is judged again when the watch brings it.
func (p *Provider) restoreCRD(ctx context.Context, conn *connection, want, live *apiextensionsv1.CustomResourceDefinition) crdVerdict {
	what, rev := crdDrift(want, live), crdRevision(live)
	older := rev < hubv1alpha1.MemberCRDRevision
	w := conn.crds
	switch {
	case what == "" && !older:
		return crdVerdict{}
	case !p.opts.InstallCRDs && what == "":
		return crdVerdict{}
	case !p.opts.InstallCRDs:
		return crdVerdict{note: fmt.Sprintf("its CRD %s differs from the hub's (%s), and the hub does not install CRDs (--install-crds=false)",
			want.Name, what)}
	case what != "" && !older && w.appliedAt(live):
		return crdVerdict{note: fmt.Sprintf("its CRD %s differs from the hub's (%s) although the hub applied it (forced): the member's API server "+
			"defaults or changes those fields otherwise than the hub does",
			want.Name, what)}
	case !p.opts.Replica.MayWrite(conn.name):
		return crdVerdict{retry: true} // fenced: tried again once the fence may let it
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	err := w.apply(ctx, want, p.opts.FieldOwner, live.ResourceVersion)
	switch {
	case apierrors.IsConflict(err):
		return crdVerdict{retry: true} // changed meanwhile: its watch brings the change
	case err != nil && what == "":
		return crdVerdict{retry: true, note: fmt.Sprintf("its CRD %s is at revision %d, older than the hub's %d, and the hub could not upgrade it "+
			"(it needs patch on customresourcedefinitions named %s): %v", want.Name, rev, hubv1alpha1.MemberCRDRevision, want.Name, err)}
	case err != nil:
		return crdVerdict{retry: true, note: fmt.Sprintf("its CRD %s differs from the hub's (%s), and the hub could not restore it "+
			"(it needs patch on customresourcedefinitions named %s): %v", want.Name, what, want.Name, err)}
	case older:
		return crdVerdict{upgraded: true, from: rev}
	}
	return crdVerdict{restored: fmt.Sprintf("its CRD %s differed from the hub's (%s)", want.Name, what)}
}

// established reports whether a CRD is established: served.
func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// namesRejected says why the member does not accept a CRD's names ("Reason: message"), or ""
// if it does or has not said yet.
func namesRejected(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// crdDefaulter defaults a CRD as the API server does, so that the hub's CRD compares with the
// member's on what either says.
var crdDefaulter = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// crdDrift says which of the fields the hub applies differ between its CRD (want) and the
// member's (live), as "spec.group, spec.versions", or "" if none: the group, the names the hub
// sets, the scope and the versions (an atomic list: schemas, served, storage, subresources,
// printer columns). Metadata, and what the hub does not set (conversion, a short name someone
// added), are not the hub's to keep.
func crdDrift(want, live *apiextensionsv1.CustomResourceDefinition) string {
	want = want.DeepCopy()
	crdDefaulter.Default(want)
	var what []string
	if want.Spec.Group != live.Spec.Group {
		what = append(what, "spec.group")
	}
	wn, ln := want.Spec.Names, live.Spec.Names
	if wn.Plural != ln.Plural || wn.Singular != ln.Singular || wn.Kind != ln.Kind || wn.ListKind != ln.ListKind ||
		len(wn.ShortNames) > 0 && !equality.Semantic.DeepEqual(wn.ShortNames, ln.ShortNames) ||
		len(wn.Categories) > 0 && !equality.Semantic.DeepEqual(wn.Categories, ln.Categories) {
		what = append(what, "spec.names")
	}
	if want.Spec.Scope != live.Spec.Scope {
		what = append(what, "spec.scope")
	}
	if !equality.Semantic.DeepEqual(want.Spec.Versions, live.Spec.Versions) {
		what = append(what, versionsDrift(want.Spec.Versions, live.Spec.Versions))
	}
	return strings.Join(what, ", ")
}

// versionsDrift names what differs between two lists of versions: the schema of a version when
// only that does, spec.versions otherwise.
func versionsDrift(want, live []apiextensionsv1.CustomResourceDefinitionVersion) string {
	if len(want) != len(live) {
		return "spec.versions"
	}
	var what []string
	for i := range want {
		w, l := want[i], live[i]
		if w.Name != l.Name {
			return "spec.versions"
		}
		if !equality.Semantic.DeepEqual(w.Schema, l.Schema) {
			what = append(what, fmt.Sprintf("spec.versions[%s].schema", w.Name))
		}
		w.Schema, l.Schema = nil, nil
		if !equality.Semantic.DeepEqual(w, l) {
			what = append(what, fmt.Sprintf("spec.versions[%s]", w.Name))
		}
	}
	return strings.Join(what, ", ")
}

// publishCRDs publishes what keepCRDs found in the member's State, if conn is still its active
// connection, and records the Events of a deletion and of each restore.
func (p *Provider) publishCRDs(ctx context.Context, name string, conn *connection, missing, newer, note string, verdicts []crdVerdict) {
	log := p.log.WithValues("cluster", name)
	changed, wentMissing, recovered, ok := p.setCRDs(name, conn, missing, newer, note)
	if !ok {
		return
	}
	switch {
	case wentMissing:
		log.Info("Member CRD deleted", "message", missing)
	case recovered:
		log.Info("Member CRD served again")
	case changed:
		log.Info("Member CRD status changed", "missing", missing, "newer", newer, "note", note)
	}
	if changed {
		p.notifyChanged(name)
	}
	if recovered {
		p.notifyReady(name)
	}
	if wentMissing {
		p.recordMemberEvent(ctx, name, corev1.EventTypeWarning, hubv1alpha1.CRDDeletedEvent, "ObserveCRD", "Member %s: %s", name, missing)
	}
	for i, v := range verdicts {
		if v.upgraded {
			log.Info("Member CRD upgraded", "crd", p.opts.CRDs[i].Name, "fromRevision", v.from, "toRevision", hubv1alpha1.MemberCRDRevision)
		}
		if v.restored != "" {
			log.Info("Member CRD restored", "drift", v.restored)
			p.recordMemberEvent(ctx, name, corev1.EventTypeNormal, hubv1alpha1.CRDRestoredEvent, "RestoreCRD", "Member %s: %s; the hub applied its own again", name, v.restored)
		}
	}
}

// setCRDs records in the member's State what keepCRDs found on conn (see member.keepCRDs). It
// returns false if the member left or conn is no longer its active connection.
func (p *Provider) setCRDs(name string, conn *connection, missing, newer, note string) (changed, wentMissing, recovered, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, known := p.members[name]
	if !known || m.active != conn {
		return false, false, false, false
	}
	changed, wentMissing, recovered = m.keepCRDs(missing, newer, note)
	return changed, wentMissing, recovered, true
}

// activeConnection returns a member's active connection, nil if none.
func (p *Provider) activeConnection(name string) *connection {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.members[name]; ok {
		return m.active
	}
	return nil
}

// enqueueCRDs has a member's CRDs kept (keepCRDs).
func (p *Provider) enqueueCRDs(name string) {
	if q := p.crdsQueue(); q != nil {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	}
}

// recordMemberEvent records an Event on a member's MemberCluster on the hub: the one object the
// hub publishes about it. Its uid, so that kubectl describe finds it, comes from the hub's cache
// (the fleet controllers watch MemberClusters), within memberUIDTimeout: a hub that does not
// answer holds up no worker (the Event goes without it, and the recorder never blocks).
func (p *Provider) recordMemberEvent(ctx context.Context, name, eventType, reason, action, note string, args ...any) {
	if p.recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: hubv1alpha1.GroupVersion.String(), Kind: "MemberCluster", Name: name}
	ctx, cancel := context.WithTimeout(ctx, memberUIDTimeout)
	defer cancel()
	mc := &hubv1alpha1.MemberCluster{}
	if err := p.hub.Get(ctx, client.ObjectKey{Name: name}, mc); err == nil {
		ref.UID = mc.UID
	}
	p.recorder.Eventf(ref, nil, eventType, reason, action, note, args...)
}

// memberUIDTimeout bounds reading a MemberCluster's uid from the hub's cache for an Event: a
// read of the cache, or, before its informer runs, its first list.
const memberUIDTimeout = time.Second
