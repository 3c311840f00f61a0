package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
)

// The label the sample FleetBundle (config/samples/fleetbundle_web.yaml) selects, and the one
// the member that stops matching gets instead.
const (
	envKey, prodEnv, stagingEnv = "env", "prod", "staging"
	// placementMembers is the fewest members the placement steps need: two selected, one not.
	placementMembers = 3
	// fastPoll is the polling interval of the placement steps' timings.
	fastPoll = 10 * time.Millisecond
)

// place labels the first two members env=prod and applies the sample FleetBundle, which selects
// them: each gets the ConfigBundle, and so the ConfigMap; the third does not.
func (d *demo) place(ctx context.Context) error {
	if len(d.members) < placementMembers {
		d.say("==> Placement needs %d members (one left unselected): skipped with --members %d", placementMembers, len(d.members))
		return nil
	}
	fb, err := config.SampleFleetBundle()
	if err != nil {
		return err
	}
	if sel := fb.Spec.ClusterSelector; sel == nil || len(sel.MatchLabels) != 1 || sel.MatchLabels[envKey] != prodEnv || len(sel.MatchExpressions) != 0 {
		return fmt.Errorf("config/samples/fleetbundle_web.yaml no longer selects %s=%s: the demo's narration needs updating", envKey, prodEnv)
	}
	d.fb = fb
	m1, m2 := d.members[0].Name, d.members[1].Name
	d.say("==> Placement: one FleetBundle, defined on the hub, placed by label in the members whose MemberCluster it selects (docs/how-to/place-and-roll-out.md)")
	if d.gcProbe != nil {
		waited := time.Now()
		if err := <-d.gcProbe; err != nil {
			return fmt.Errorf("waiting for the members' garbage collectors: %w", err)
		}
		if w := time.Since(waited); w > 100*time.Millisecond {
			d.say("    (first %s until the members' garbage collectors handle ConfigBundles: a kube-controller-manager finds a CRD created after it started, as the hub's ConfigBundle CRD was, at its next discovery of resources, every 30 s)",
				w.Round(100*time.Millisecond))
		}
	}
	d.say("$ kubectl label memberclusters %s %s %s=%s", m1, m2, envKey, prodEnv)
	for _, m := range []string{m1, m2} {
		if err := d.labelMember(ctx, m, prodEnv); err != nil {
			return err
		}
	}
	if err := d.ensureNamespace(ctx, fb.Namespace); err != nil {
		return err
	}
	d.say("$ kubectl apply -f config/samples/fleetbundle_web.yaml    # FleetBundle %s/%s, clusterSelector %s=%s", fb.Namespace, fb.Name, envKey, prodEnv)
	if err := d.fl.Hub.Create(ctx, fb.DeepCopy()); err != nil {
		return fmt.Errorf("creating FleetBundle %s/%s: %w", fb.Namespace, fb.Name, err)
	}
	start := time.Now()
	took, err := d.until(ctx, map[string]wait.ConditionWithContextFunc{
		m1: d.configMapIs(m1, true), m2: d.configMapIs(m2, true),
	})
	if err != nil {
		return err
	}
	d.say("    ConfigMap %s in %s after %s and in %s after %s, from the FleetBundle's create (the hub places the ConfigBundle, the member's reconciler makes its ConfigMap; polled every %s)",
		fb.Name, m1, ms(took[m1], start), m2, ms(took[m2], start), fastPoll)
	d.placed = 2
	return d.showPlacement(ctx, 0)
}

// move takes the label off the second member and puts it on the third: the bundle leaves the one
// (the garbage collector then deletes its ConfigMap) and reaches the other.
func (d *demo) move(ctx context.Context) error {
	if d.fb == nil {
		return nil
	}
	m2, m3 := d.members[1].Name, d.members[2].Name
	d.say("==> A label change moves it: %s leaves %s=%s, %s joins", m2, envKey, prodEnv, m3)
	d.say("$ kubectl label memberclusters %s %s=%s --overwrite; kubectl label memberclusters %s %s=%s", m2, envKey, stagingEnv, m3, envKey, prodEnv)
	if err := d.labelMember(ctx, m2, stagingEnv); err != nil {
		return err
	}
	left := time.Now()
	if err := d.labelMember(ctx, m3, prodEnv); err != nil {
		return err
	}
	joined := time.Now()
	took, err := d.until(ctx, map[string]wait.ConditionWithContextFunc{
		"bundle gone":    d.bundleGone(m2),
		"configmap gone": d.configMapIs(m2, false),
		"configmap":      d.configMapIs(m3, true),
	})
	if err != nil {
		return err
	}
	d.say("    %s: placed bundle deleted by the hub after %s, its ConfigMap by the member's garbage collector after %s; %s: ConfigMap %s after %s (each from its label change)",
		m2, ms(took["bundle gone"], left), ms(took["configmap gone"], left), m3, d.fb.Name, ms(took["configmap"], joined))
	return d.showPlacement(ctx, 0)
}

// restore deletes the placed bundle of the first member by hand; the hub puts it back, counts a
// heal on the FleetBundle and records a PlacedBundleHealed Event.
func (d *demo) restore(ctx context.Context) error {
	if d.fb == nil {
		return nil
	}
	m1, name := d.members[0].Name, d.fb.Name
	c := d.fl.Member(m1).Client
	old := &configbundlev1alpha1.ConfigBundle{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: d.fb.Namespace, Name: name}, old); err != nil {
		return err
	}
	d.say("==> Deleting the placed ConfigBundle by hand in %s (its ConfigMap goes too, by the garbage collector)", m1)
	d.say("$ kubectl --context %s delete configbundle %s", m1, name)
	if err := c.Delete(ctx, old, client.Preconditions{UID: &old.UID}); err != nil {
		return err
	}
	deleted := time.Now()
	took, err := d.until(ctx, map[string]wait.ConditionWithContextFunc{
		"bundle":    d.bundleReplaced(m1, old.UID),
		"configmap": d.configMapReplaced(m1, old.UID),
	})
	if err != nil {
		return err
	}
	d.say("    restored by the hub after %s (a new ConfigBundle %s); its ConfigMap remade after %s, once the garbage collector had removed the old one (from the delete's acknowledgement)",
		ms(took["bundle"], deleted), name, ms(took["configmap"], deleted))
	if err := d.poll(ctx, "the FleetBundle to count the heal", d.fleetBundleIs(2, 1)); err != nil {
		return err
	}
	d.say("$ kubectl get fleetbundle %s -o custom-columns=NAME:.metadata.name,SELECTED:.status.clusters.selected,READY:.status.clusters.ready,HEALS:.status.heals", name)
	got := &hubv1alpha1.FleetBundle{}
	if err := d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(d.fb), got); err != nil {
		return err
	}
	w := tabwriter.NewWriter(d.out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAME\tSELECTED\tREADY\tHEALS")
	fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", got.Name, got.Status.Clusters.Selected, got.Status.Clusters.Ready, got.Status.Heals)
	if err := w.Flush(); err != nil {
		return err
	}
	d.say("$ kubectl get events --field-selector reason=%s", hubv1alpha1.PlacedBundleHealedEvent)
	return d.healEvents(ctx)
}

// gcProbeWait is how long a round of probeGarbageCollectors waits for a garbage collector.
const gcProbeWait = 2 * time.Second

// startGarbageCollectorProbe starts probeGarbageCollectors in the background, once the members
// have the ConfigBundle CRD; place waits for it.
func (d *demo) startGarbageCollectorProbe(ctx context.Context) {
	if len(d.members) < placementMembers {
		return
	}
	d.gcProbe = make(chan error, 1)
	go func() { d.gcProbe <- d.probeGarbageCollectors(ctx) }()
}

// probeGarbageCollectors waits until the garbage collector of every member deletes at once a
// ConfigMap whose owner, a ConfigBundle, does not exist. A kube-controller-manager handles the
// objects of a CRD created after it started (as the hub's ConfigBundle CRD was) only from its
// next discovery of resources, every 30 seconds: until then it misses the deletion of a
// ConfigBundle, and the placement steps would time the garbage collector rather than the hub.
// Each round uses a new ConfigMap and owner uid, and deletes by hand what was not collected (a
// garbage collector retries what it cannot resolve with a growing backoff). It writes nothing the
// hub counts: no ConfigBundle is created.
func (d *demo) probeGarbageCollectors(ctx context.Context) error {
	pending := map[string]client.WithWatch{}
	for _, m := range d.members {
		pending[m.Name] = m.Client
	}
	start := time.Now()
	for round := 1; len(pending) > 0; round++ {
		if time.Since(start) > stepTimeout {
			return fmt.Errorf("the garbage collectors of %d members still ignore ConfigBundles after %s", len(pending), stepTimeout)
		}
		name := fmt.Sprintf("demo-gc-probe-%d", round)
		key := client.ObjectKey{Namespace: "default", Name: name}
		for member, c := range pending {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: configbundlev1alpha1.GroupVersion.String(), Kind: "ConfigBundle", Name: name, UID: types.UID(fmt.Sprintf("%s-%s-%d", name, member, time.Now().UnixNano())),
			}}}}
			if err := c.Create(ctx, cm); err != nil {
				return fmt.Errorf("creating ConfigMap %s in %s: %w", name, member, err)
			}
		}
		deadline := time.Now().Add(gcProbeWait)
		for len(pending) > 0 && time.Now().Before(deadline) {
			for member, c := range pending {
				if apierrors.IsNotFound(c.Get(ctx, key, &corev1.ConfigMap{})) {
					delete(pending, member)
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(fastPoll):
			}
		}
		for member, c := range pending {
			if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: name}}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting ConfigMap %s in %s: %w", name, member, err)
			}
		}
	}
	return nil
}

// labelMember sets env=value on a MemberCluster, as kubectl label --overwrite does.
func (d *demo) labelMember(ctx context.Context, name, value string) error {
	return d.fl.LabelMember(ctx, name, map[string]string{envKey: value})
}

// ensureNamespace creates the FleetBundle's namespace in every member that lacks it: without
// spec.createNamespace the hub creates none (it would report NamespaceMissing).
func (d *demo) ensureNamespace(ctx context.Context, ns string) error {
	var created []string
	for _, m := range d.members {
		err := m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		switch {
		case err == nil:
			created = append(created, m.Name)
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("creating namespace %s in %s: %w", ns, m.Name, err)
		}
	}
	why := "without spec.createNamespace the hub creates no namespaces in members: a member without it would be reported NamespaceMissing until someone creates it"
	if len(created) == 0 {
		d.say("    each member gets the bundle in the namespace named like the FleetBundle's, %s, which every member already has (%s)", ns, why)
		return nil
	}
	d.say("$ kubectl create namespace %s    # in %s: %s", ns, strings.Join(created, ", "), why)
	return nil
}

// until polls the conditions every fastPoll until all hold, and returns when each first held.
func (d *demo) until(ctx context.Context, conds map[string]wait.ConditionWithContextFunc) (map[string]time.Time, error) {
	at := map[string]time.Time{}
	err := wait.PollUntilContextTimeout(ctx, fastPoll, stepTimeout, true, func(ctx context.Context) (bool, error) {
		for what, cond := range conds {
			if _, ok := at[what]; ok {
				continue
			}
			if ok, err := cond(ctx); err != nil {
				return false, err
			} else if ok {
				at[what] = time.Now()
			}
		}
		return len(at) == len(conds), nil
	})
	if err != nil {
		var missing []string
		for what := range conds {
			if _, ok := at[what]; !ok {
				missing = append(missing, what)
			}
		}
		return nil, fmt.Errorf("waiting for %s: %w", strings.Join(missing, ", "), err)
	}
	return at, nil
}

// ms is the time from start to t, in milliseconds.
func ms(t, start time.Time) time.Duration {
	return t.Sub(start).Round(time.Millisecond)
}

// configMapIs returns a condition: the FleetBundle's ConfigMap in member exists with the
// template's message (present), or does not exist (!present).
func (d *demo) configMapIs(member string, present bool) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		err := d.fl.Member(member).Client.Get(ctx, client.ObjectKeyFromObject(d.fb), cm)
		if apierrors.IsNotFound(err) {
			return !present, nil
		}
		if err != nil {
			return false, nil
		}
		return present && cm.Data[configbundlev1alpha1.MessageKey] == d.fb.Spec.Template.Spec.Message, nil
	}
}

// bundleGone returns a condition: the FleetBundle's ConfigBundle in member does not exist.
func (d *demo) bundleGone(member string) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		err := d.fl.Member(member).Client.Get(ctx, client.ObjectKeyFromObject(d.fb), &configbundlev1alpha1.ConfigBundle{})
		return apierrors.IsNotFound(err), nil
	}
}

// bundleReplaced returns a condition: the FleetBundle's ConfigBundle in member exists with
// another uid than old.
func (d *demo) bundleReplaced(member string, old types.UID) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		b := &configbundlev1alpha1.ConfigBundle{}
		if err := d.fl.Member(member).Client.Get(ctx, client.ObjectKeyFromObject(d.fb), b); err != nil {
			return false, nil
		}
		return b.UID != old, nil
	}
}

// configMapReplaced returns a condition: the FleetBundle's ConfigMap in member exists, with the
// template's message, and is controlled by a bundle of another uid than old.
func (d *demo) configMapReplaced(member string, old types.UID) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := d.fl.Member(member).Client.Get(ctx, client.ObjectKeyFromObject(d.fb), cm); err != nil {
			return false, nil
		}
		ref := metav1.GetControllerOfNoCopy(cm)
		return ref != nil && ref.UID != old && cm.Data[configbundlev1alpha1.MessageKey] == d.fb.Spec.Template.Spec.Message, nil
	}
}

// fleetBundleIs returns a condition: the FleetBundle is AllReady in ready members, with heals
// heals.
func (d *demo) fleetBundleIs(ready int32, heals int64) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		fb := &hubv1alpha1.FleetBundle{}
		if err := d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(d.fb), fb); err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(fb.Status.Conditions, hubv1alpha1.ReadyCondition)
		return c != nil && c.Reason == hubv1alpha1.AllReadyReason && fb.Status.ObservedGeneration == fb.Generation &&
			fb.Status.Clusters == hubv1alpha1.PlacementCounts{Selected: ready, Applied: ready, Ready: ready, Updated: ready} && fb.Status.Heals == heals, nil
	}
}

// showPlacement waits for the FleetBundle's status, then prints it as kubectl get fb does, and
// what each member holds.
func (d *demo) showPlacement(ctx context.Context, heals int64) error {
	if err := d.poll(ctx, "the FleetBundle to be AllReady in 2 members", d.fleetBundleIs(2, heals)); err != nil {
		return err
	}
	d.say("$ kubectl get fleetbundles    # short name fb")
	if err := d.table(ctx, "namespaces/"+d.fb.Namespace+"/fleetbundles"); err != nil {
		return err
	}
	d.say("$ kubectl get configbundle,configmap %s    # in each member", d.fb.Name)
	w := tabwriter.NewWriter(d.out, 0, 8, 3, ' ', 0)
	fmt.Fprintf(w, "MEMBER\t%s\tCONFIGBUNDLE\tCONFIGMAP DATA.MESSAGE\n", strings.ToUpper(envKey))
	for _, m := range d.members[:placementMembers] {
		mc := &hubv1alpha1.MemberCluster{}
		if err := d.fl.Hub.Get(ctx, client.ObjectKey{Name: m.Name}, mc); err != nil {
			return err
		}
		env := mc.Labels[envKey]
		if env == "" {
			env = "<none>"
		}
		bundle, message := "<none>", "<none>"
		b := &configbundlev1alpha1.ConfigBundle{}
		switch err := m.Client.Get(ctx, client.ObjectKeyFromObject(d.fb), b); {
		case err == nil:
			bundle = "placed"
			if c := meta.FindStatusCondition(b.Status.Conditions, configbundlev1alpha1.ReadyCondition); c != nil {
				bundle += ", " + c.Reason
			}
		case !apierrors.IsNotFound(err):
			return err
		}
		cm := &corev1.ConfigMap{}
		switch err := m.Client.Get(ctx, client.ObjectKeyFromObject(d.fb), cm); {
		case err == nil:
			message = strconv.Quote(cm.Data[configbundlev1alpha1.MessageKey])
		case !apierrors.IsNotFound(err):
			return err
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, env, bundle, message)
	}
	return w.Flush()
}

// healEvents prints the FleetBundle's PlacedBundleHealed Events as kubectl get events does.
func (d *demo) healEvents(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(d.fl.HubPlane.Config)
	if err != nil {
		return err
	}
	var notes []string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, stepTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := cs.EventsV1().Events(d.fb.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		notes = notes[:0]
		for _, e := range list.Items {
			if e.Regarding.Kind == "FleetBundle" && e.Regarding.Name == d.fb.Name && e.Reason == hubv1alpha1.PlacedBundleHealedEvent {
				notes = append(notes, e.Type+"\t"+e.Reason+"\tfleetbundle/"+e.Regarding.Name+"\t"+e.Note)
			}
		}
		return len(notes) > 0, nil
	})
	if err != nil {
		return errors.Join(errors.New("waiting for the PlacedBundleHealed Event"), err)
	}
	w := tabwriter.NewWriter(d.out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "TYPE\tREASON\tOBJECT\tMESSAGE")
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return w.Flush()
}
