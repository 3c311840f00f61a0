package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// The templated variant of the placement latency phase: beside the FleetBundle whose
// template is used as written, a templated one (GoTemplate: its message, 3 data values and 2
// labels rendered per member, one override for half of the members) has its template's message
// changed as many times, alternating with the untemplated one's changes and the floor's, so that
// the machine's drift hits all three.
const (
	// templatedName is the templated FleetBundle (not a prefix of placementName, nor of mem-).
	templatedName = "tpl"
	// regionLabel is the MemberCluster label the templated FleetBundle renders.
	regionLabel = "bench-region"
	// goalTemplatedRatio is the goal of the templated p99 against the untemplated one's.
	goalTemplatedRatio = 1.1
)

// benchRegion is a member's region label: eu or us, alternately.
func benchRegion(name string) string {
	if name[len(name)-1]%2 == 0 {
		return "eu"
	}
	return "us"
}

// placed is a FleetBundle of the placement latency phase: untemplated (placementName) or
// templated (templatedName).
type placed struct{ templated bool }

func (p placed) name() string {
	if p.templated {
		return templatedName
	}
	return placementName
}

// templateMessage is the template's message for a change named message.
func (p placed) templateMessage(message string) string {
	if p.templated {
		return `{{ .Cluster.Name }} in {{ index .Cluster.Labels "` + regionLabel + `" }}: ` + message
	}
	return message
}

// expect is the message member m gets for a change named message.
func (p placed) expect(m *member, message string) string {
	if p.templated {
		return m.Name + " in " + benchRegion(m.Name) + ": " + message
	}
	return message
}

// fleetBundle is the FleetBundle as first created, with the change message.
func (p placed) fleetBundle(message string) *hubv1alpha1.FleetBundle {
	fb := newFleetBundle(p.name(), p.templateMessage(message))
	if !p.templated {
		return fb
	}
	region := `{{ index .Cluster.Labels "` + regionLabel + `" }}`
	fb.Spec.TemplateEngine = hubv1alpha1.TemplateEngineGoTemplate
	fb.Spec.Template.Spec.Data = map[string]configbundlev1alpha1.DataValue{
		"REGION":   configbundlev1alpha1.DataValue(region),
		"ENDPOINT": configbundlev1alpha1.DataValue("https://{{ .Cluster.Name }}." + region + ".internal:8443"),
		"FEATURES": configbundlev1alpha1.DataValue(`{{ if eq (index .Cluster.Labels "` + regionLabel + `") "eu" }}stable{{ else }}stable,preview{{ end }}`),
	}
	fb.Spec.Template.Metadata.Labels = map[string]string{"bench": "placement", "region": region, "cluster": "{{ .Cluster.Name }}"}
	fb.Spec.Overrides = []hubv1alpha1.TemplateOverride{{
		Name:            "eu",
		ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{regionLabel: "eu"}},
		Data:            map[string]configbundlev1alpha1.DataValue{"LOG_LEVEL": "debug"},
		Labels:          map[string]string{"tier": "{{ .Cluster.Name }}-eu"},
	}}
	return fb
}

// hubPlace creates the FleetBundle, or changes its template's message (one merge patch), and
// returns the time from the acknowledgement to the ConfigMap with the member's message seen in
// every member.
func (f *fleet) hubPlace(ctx context.Context, pm []*member, tr *cmTracker, p placed, message string, create bool) (time.Duration, error) {
	var err error
	if create {
		err = f.Hub.Create(ctx, p.fleetBundle(message))
	} else {
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"message":%q}}}}`, p.templateMessage(message))
		fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Name: p.name(), Namespace: placementNS}}
		err = f.Hub.Patch(ctx, fb, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	if err != nil {
		return 0, err
	}
	acked := time.Now()
	last, err := tr.waitEach(ctx, pm, placementNS, p.name(), func(m *member) string { return p.expect(m, message) })
	return max(0, last.Sub(acked)), err
}

// labelRegions labels every member's MemberCluster with its region (or, with remove, removes it).
func (f *fleet) labelRegions(ctx context.Context, pm []*member, remove bool) error {
	for _, m := range pm {
		region := benchRegion(m.Name)
		if remove {
			region = ""
		}
		if err := f.labelMember(ctx, m.Name, regionLabel, region); err != nil {
			return err
		}
	}
	return nil
}

// ofTemplated reports whether a write to the hub cluster is of the templated FleetBundle: its
// status, or one of its revisions (ControllerRevisions <name>-<n>).
func ofTemplated(w servedWrite) bool {
	return w.Name == templatedName || strings.HasPrefix(w.Name, templatedName+"-")
}

// templatedWrites is the placement controller's writes of the templated bundle per change and
// member.
func (pr *placementResults) templatedWrites() float64 {
	return float64(pr.TemplatedUpdates) / float64(max(1, (len(pr.Templated)+pr.TemplatedErrors)*pr.Members))
}

// templatedMissed names the templated goal this run missed, if it did.
func (pr *placementResults) templatedMissed() []string {
	var missed []string
	if r := ratio(pr.Templated.pct(99), pr.Hub.pct(99)); r > goalTemplatedRatio {
		missed = append(missed, fmt.Sprintf("templated p99 within %.1fx of the untemplated one's (%.2fx)", goalTemplatedRatio, r))
	}
	if w := pr.templatedWrites(); w < 0.9999 || w > 1.0001 {
		missed = append(missed, fmt.Sprintf("exactly 1 update of the templated bundle per member per change (%.2f)", w))
	}
	if pr.TemplatedErrors > 0 {
		missed = append(missed, fmt.Sprintf("every templated change seen in every member within %s (%d not)", placementTimeout, pr.TemplatedErrors))
	}
	return missed
}

// printTemplated prints the templated row's comparison with the untemplated one.
func (r *results) printTemplated(p printer) {
	pr := &r.Placement
	hub, tpl := pr.Hub.pct(99), pr.Templated.pct(99)
	p("\ntemplated (GoTemplate: message, 3 data values and 2 labels rendered per member, 1 override for half of them) against untemplated: p50 %s vs %s, p99 %s vs %s: %.2fx (goal within %.1fx); writes of the templated bundle per change per member %.2f (goal exactly 1)",
		ms(pr.Templated.pct(50)), ms(pr.Hub.pct(50)), ms(tpl), ms(hub), ratio(tpl, hub), goalTemplatedRatio, pr.templatedWrites())
}
