package demo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// The templates step: one FleetBundle over every member, rendered per member from its
// MemberCluster's name and labels, with an override for the dev member; a label change re-renders
// that member alone; a member whose labels cannot render it is reported RenderFailed and keeps
// what it holds, while the others proceed.
const (
	// templatedName is the FleetBundle of the templates step
	// (config/samples/fleetbundle_templated.yaml), in the namespace default.
	templatedName = "api"
	// regionKey is the label the template reads; devEnv the env the override "dev" selects.
	regionKey, devEnv = "region", "dev"
	// logLevelKey is the data key the override changes.
	logLevelKey = "LOG_LEVEL"
	// templatedMessage is the template's message.
	templatedMessage = "endpoint=https://api.{{ .Cluster.Labels.region }}.example.com cluster={{ .Cluster.Name }}"
)

// demoRegions are the members' regions, in order; movedRegion the third member's new one.
var demoRegions, movedRegion = []string{"eu", "us", "ap"}, "sa"

// TemplatedFleetBundle is the FleetBundle of config/samples/fleetbundle_templated.yaml: every
// member, its message, label region and data rendered with GoTemplate from the member's
// MemberCluster, LOG_LEVEL=debug in the members labelled env=dev (override dev).
func TemplatedFleetBundle() *hubv1alpha1.FleetBundle {
	return &hubv1alpha1.FleetBundle{
		TypeMeta:   metav1.TypeMeta{APIVersion: hubv1alpha1.GroupVersion.String(), Kind: "FleetBundle"},
		ObjectMeta: metav1.ObjectMeta{Name: templatedName, Namespace: metav1.NamespaceDefault},
		Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector: &metav1.LabelSelector{},
			TemplateEngine:  hubv1alpha1.TemplateEngineGoTemplate,
			Template: hubv1alpha1.ConfigBundleTemplate{
				Metadata: hubv1alpha1.TemplateMetadata{Labels: map[string]string{regionKey: "{{ .Cluster.Labels.region }}"}},
				Spec: configbundlev1alpha1.ConfigBundleSpec{
					Message: templatedMessage,
					Data:    map[string]configbundlev1alpha1.DataValue{logLevelKey: "info", "CLUSTER": "{{ .Cluster.Name }}"},
				},
			},
			Overrides: []hubv1alpha1.TemplateOverride{{
				Name:            devEnv,
				ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{envKey: devEnv}},
				Data:            map[string]configbundlev1alpha1.DataValue{logLevelKey: "debug"},
			}},
		},
	}
}

// rendered is the message the template renders for member in region.
func rendered(member, region string) string {
	return fmt.Sprintf("endpoint=https://api.%s.example.com cluster=%s", region, member)
}

// templates takes the tour of per-member values.
func (d *demo) templates(ctx context.Context) error {
	if len(d.members) < placementMembers {
		d.say("==> Per-member values need %d members: skipped with --members %d", placementMembers, len(d.members))
		return nil
	}
	d.templatedFB = TemplatedFleetBundle()
	if err := d.applyTemplated(ctx); err != nil {
		return err
	}
	if err := d.relabel(ctx); err != nil {
		return err
	}
	if err := d.renderFails(ctx); err != nil {
		return err
	}
	d.say("==> To preview what each member gets (or its render error), with the hub's own code and without writing anything:")
	d.say("$ hub render %s -n %s    # every selected member; exit code 1 if any fails to render", templatedName, d.templatedFB.Namespace)
	d.say("$ hub render %s -n %s --cluster %s", templatedName, d.templatedFB.Namespace, d.members[1].Name)
	return nil
}

// applyTemplated labels the members with their regions, the second env=dev, and applies the
// templated FleetBundle: each member's ConfigMap gets its own message.
func (d *demo) applyTemplated(ctx context.Context) error {
	fb := d.templatedFB
	d.say("==> Per-member values: one FleetBundle %s over every member, its message rendered from each member's MemberCluster (its name, its %s label), %s=debug for the %s=%s member by an override (docs/how-to/per-member-values.md)",
		templatedName, regionKey, logLevelKey, envKey, devEnv)
	want := map[string]string{}
	for i, m := range d.members[:placementMembers] {
		labels := map[string]string{regionKey: demoRegions[i]}
		if i == 1 {
			labels[envKey] = devEnv // it was staging: the FleetBundle web selects neither
			d.say("$ kubectl label memberclusters %s %s=%s %s=%s --overwrite", m.Name, regionKey, demoRegions[i], envKey, devEnv)
		} else {
			d.say("$ kubectl label memberclusters %s %s=%s", m.Name, regionKey, demoRegions[i])
		}
		if err := d.fl.LabelMember(ctx, m.Name, labels); err != nil {
			return err
		}
		want[m.Name] = rendered(m.Name, demoRegions[i])
	}
	if err := d.ensureNamespace(ctx, fb.Namespace); err != nil {
		return err
	}
	d.say("$ kubectl apply -f config/samples/fleetbundle_templated.yaml    # templateEngine GoTemplate; message %q, label %s and data %s: info from the template; override %s: %s=%s gets %s: debug",
		templatedMessage, regionKey, logLevelKey, devEnv, envKey, devEnv, logLevelKey)
	start := time.Now()
	if err := d.fl.Hub.Create(ctx, fb.DeepCopy()); err != nil {
		return fmt.Errorf("creating FleetBundle %s/%s: %w", fb.Namespace, fb.Name, err)
	}
	if err := d.renderedIn(ctx, want, start, "from the FleetBundle's create"); err != nil {
		return err
	}
	d.placed += placementMembers
	return d.showTemplated(ctx)
}

// renderedIn waits until each member's ConfigMap holds its message in want and the FleetBundle
// is AllReady in every member, saying when each member got it (from start).
func (d *demo) renderedIn(ctx context.Context, want map[string]string, start time.Time, from string) error {
	conds := map[string]wait.ConditionWithContextFunc{}
	for member, message := range want {
		conds[member] = d.templatedMessageIs(member, message)
	}
	took, err := d.until(ctx, conds)
	if err != nil {
		return err
	}
	var parts []string
	for _, m := range d.members[:placementMembers] {
		if t, ok := took[m.Name]; ok {
			parts = append(parts, fmt.Sprintf("%s after %s", m.Name, ms(t, start)))
		}
	}
	d.say("    its own message in the ConfigMap of %s (%s; polled every %s)", strings.Join(parts, ", "), from, fastPoll)
	return d.poll(ctx, "the FleetBundle "+templatedName+" to be AllReady", d.templatedReady(false))
}

// relabel changes the third member's region: its ConfigMap alone changes, and it is no heal.
func (d *demo) relabel(ctx context.Context) error {
	m3 := d.members[2].Name
	before, err := d.configMapVersions(ctx)
	if err != nil {
		return err
	}
	heals, rev, err := d.templatedHeals(ctx)
	if err != nil {
		return err
	}
	d.say("==> A label change re-renders that member alone: %s moves from %s=%s to %s=%s", m3, regionKey, demoRegions[2], regionKey, movedRegion)
	d.say("$ kubectl label memberclusters %s %s=%s --overwrite", m3, regionKey, movedRegion)
	if err := d.fl.LabelMember(ctx, m3, map[string]string{regionKey: movedRegion}); err != nil {
		return err
	}
	start := time.Now()
	if err := d.renderedIn(ctx, map[string]string{m3: rendered(m3, movedRegion)}, start, "from the label change"); err != nil {
		return err
	}
	after, err := d.configMapVersions(ctx)
	if err != nil {
		return err
	}
	var changed, unchanged []string
	for _, m := range d.members[:placementMembers] {
		if before[m.Name] == after[m.Name] {
			unchanged = append(unchanged, fmt.Sprintf("%s (resourceVersion %s)", m.Name, after[m.Name]))
		} else {
			changed = append(changed, fmt.Sprintf("%s (resourceVersion %s -> %s)", m.Name, before[m.Name], after[m.Name]))
		}
	}
	if len(changed) != 1 || !strings.HasPrefix(changed[0], m3+" ") {
		return fmt.Errorf("after relabelling %s, the ConfigMaps that changed are %v, not %s's alone", m3, changed, m3)
	}
	d.say("    ConfigMap %s changed in %s only; unchanged in %s", templatedName, changed[0], strings.Join(unchanged, ", "))
	now, nowRev, err := d.templatedHeals(ctx)
	if err != nil {
		return err
	}
	if now != heals || nowRev != rev {
		return fmt.Errorf("relabelling %s made FleetBundle %s's heals %d -> %d, its revision %d -> %d: a re-render is neither a heal nor a revision", m3, templatedName, heals, now, rev, nowRev)
	}
	d.say("$ kubectl get fleetbundle %s -o jsonpath='{.status.heals} {.status.updateRevision}'    # %d and %d before the label change: a re-render is not a heal, nor a new revision", templatedName, heals, rev)
	d.say("%d %d", now, nowRev)
	return d.showTemplated(ctx)
}

// renderFails takes the region label off the first member: the FleetBundle reports it
// RenderFailed, it keeps what it holds; the label back places the bundle again.
func (d *demo) renderFails(ctx context.Context) error {
	m1 := d.members[0].Name
	held := rendered(m1, demoRegions[0])
	d.say("==> A member the template cannot render for: %s loses its %s label; the other members proceed as usual", m1, regionKey)
	d.say("$ kubectl label memberclusters %s %s-", m1, regionKey)
	if err := d.fl.LabelMember(ctx, m1, map[string]string{regionKey: ""}); err != nil {
		return err
	}
	start := time.Now()
	var failure hubv1alpha1.ClusterFailure
	if err := d.poll(ctx, m1+" to be reported RenderFailed", d.renderFailed(m1, &failure)); err != nil {
		return err
	}
	d.say("    reported RenderFailed after %s (from the label change)", time.Since(start).Round(time.Millisecond))
	d.say("$ kubectl get fleetbundle %s", templatedName)
	if err := d.table(ctx, "namespaces/"+d.templatedFB.Namespace+"/fleetbundles/"+templatedName); err != nil {
		return err
	}
	d.say("$ kubectl get fleetbundle %s -o jsonpath='{range .status.failedClusters[*]}{.cluster}{\"\\t\"}{.reason}{\"\\t\"}{.message}{\"\\n\"}{end}'", templatedName)
	if err := printTable(d.out, &metav1.Table{
		ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Cluster"}, {Name: "Reason"}, {Name: "Message"}},
		Rows:              []metav1.TableRow{{Cells: []any{failure.Cluster, failure.Reason, failure.Message}}},
	}); err != nil {
		return err
	}
	if ok, _ := d.templatedMessageIs(m1, held)(ctx); !ok {
		return fmt.Errorf("%s no longer holds its previous bundle after RenderFailed", m1)
	}
	d.say("    %s keeps what it held: nothing is written to a member whose render fails", m1)
	if err := d.showTemplated(ctx); err != nil {
		return err
	}
	d.say("==> The label back: %s is placed again", m1)
	d.say("$ kubectl label memberclusters %s %s=%s", m1, regionKey, demoRegions[0])
	if err := d.fl.LabelMember(ctx, m1, map[string]string{regionKey: demoRegions[0]}); err != nil {
		return err
	}
	start = time.Now()
	if err := d.poll(ctx, "the FleetBundle "+templatedName+" to be AllReady without failedClusters", d.templatedReady(true)); err != nil {
		return err
	}
	d.say("    RenderFailed gone, AllReady in %d members again after %s (from the label change)", placementMembers, time.Since(start).Round(time.Millisecond))
	d.say("$ kubectl get fleetbundle %s", templatedName)
	return d.table(ctx, "namespaces/"+d.templatedFB.Namespace+"/fleetbundles/"+templatedName)
}

// templatedConfigMap returns the templated FleetBundle's ConfigMap in member, nil if none.
func (d *demo) templatedConfigMap(ctx context.Context, member string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	switch err := d.fl.Member(member).Client.Get(ctx, client.ObjectKeyFromObject(d.templatedFB), cm); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return cm, nil
}

// templatedMessageIs returns a condition: the templated FleetBundle's ConfigMap in member holds
// message.
func (d *demo) templatedMessageIs(member, message string) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		cm, err := d.templatedConfigMap(ctx, member)
		return err == nil && cm != nil && cm.Data[configbundlev1alpha1.MessageKey] == message, nil
	}
}

// configMapVersions returns the resourceVersion of the templated FleetBundle's ConfigMap in each
// member.
func (d *demo) configMapVersions(ctx context.Context) (map[string]string, error) {
	versions := map[string]string{}
	for _, m := range d.members[:placementMembers] {
		cm, err := d.templatedConfigMap(ctx, m.Name)
		if err != nil {
			return nil, err
		}
		if cm != nil {
			versions[m.Name] = cm.ResourceVersion
		}
	}
	return versions, nil
}

// templatedFleetBundle reads the templated FleetBundle from the hub.
func (d *demo) templatedFleetBundle(ctx context.Context) (*hubv1alpha1.FleetBundle, error) {
	fb := &hubv1alpha1.FleetBundle{}
	return fb, d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(d.templatedFB), fb)
}

// templatedHeals returns the templated FleetBundle's status.heals and status.updateRevision.
func (d *demo) templatedHeals(ctx context.Context) (heals, rev int64, err error) {
	fb, err := d.templatedFleetBundle(ctx)
	if err != nil {
		return 0, 0, err
	}
	return fb.Status.Heals, fb.Status.UpdateRevision, nil
}

// templatedReady returns a condition: the templated FleetBundle's status, for its generation, is
// AllReady in every member (and, if clean, lists no failed member).
func (d *demo) templatedReady(clean bool) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		fb, err := d.templatedFleetBundle(ctx)
		if err != nil {
			return false, nil
		}
		n := int32(len(d.members))
		c := meta.FindStatusCondition(fb.Status.Conditions, hubv1alpha1.ReadyCondition)
		return c != nil && c.Reason == hubv1alpha1.AllReadyReason && fb.Status.ObservedGeneration == fb.Generation &&
			fb.Status.Clusters == hubv1alpha1.PlacementCounts{Selected: n, Applied: n, Ready: n, Updated: n} &&
			(!clean || len(fb.Status.FailedClusters) == 0), nil
	}
}

// renderFailed returns a condition: the templated FleetBundle lists member in failedClusters with
// reason RenderFailed, and it alone failed; the entry is stored in failure.
func (d *demo) renderFailed(member string, failure *hubv1alpha1.ClusterFailure) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		fb, err := d.templatedFleetBundle(ctx)
		if err != nil || fb.Status.ObservedGeneration != fb.Generation {
			return false, nil
		}
		n, c := int32(len(d.members)), fb.Status.Clusters
		if c.Selected != n || c.Ready != n-1 || c.Updated != n-1 || c.Failed != 1 {
			return false, nil
		}
		for _, f := range fb.Status.FailedClusters {
			if f.Cluster == member && f.Reason == hubv1alpha1.RenderFailedReason {
				*failure = f
				return true, nil
			}
		}
		return false, nil
	}
}

// showTemplated prints, for each member, its labels the template reads and what its ConfigMap
// holds.
func (d *demo) showTemplated(ctx context.Context) error {
	d.say("$ kubectl get configmap %s -o jsonpath='{.data.message}{\"\\t\"}{.data.%s}'    # in each member", templatedName, logLevelKey)
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Member"}, {Name: regionKey}, {Name: envKey}, {Name: "Data.message"}, {Name: "Data." + logLevelKey},
	}}
	for _, m := range d.members[:placementMembers] {
		mc := &hubv1alpha1.MemberCluster{}
		if err := d.fl.Hub.Get(ctx, client.ObjectKey{Name: m.Name}, mc); err != nil {
			return err
		}
		cm, err := d.templatedConfigMap(ctx, m.Name)
		if err != nil {
			return err
		}
		message, level := "<none>", "<none>"
		if cm != nil {
			message, level = strconv.Quote(cm.Data[configbundlev1alpha1.MessageKey]), cm.Data[logLevelKey]
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []any{m.Name, orNone(mc.Labels[regionKey]), orNone(mc.Labels[envKey]), message, level}})
	}
	return printTable(d.out, t)
}

// orNone is s, or <none> if it is empty, as kubectl prints an empty cell.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
