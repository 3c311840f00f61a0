package demo

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/kwok"
)

// The workloads step: a FleetBundle whose rollout restarts the Deployment reading it in each
// member (spec.rollout.workloads Restart); a value the application refuses halts the rollout in
// the canary, on its own Deployment, with the rest of the fleet on the old value.
const (
	// appName names the FleetBundle, its ConfigMap and the Deployment that reads it.
	appName = "checkout-config"
	// appTimeout is the rollout's workloadTimeout in the demo.
	appTimeout = 10 * time.Second
	// appGood and appFixed are values the application takes.
	appGood, appFixed = "mode=fast", "mode=safe"
)

// workloads takes the tour of a rollout judged by the application that reads the bundle.
func (d *demo) workloads(ctx context.Context) error {
	if len(d.members) < 2 {
		return nil // the staged rollout step said so
	}
	kctx, stop := context.WithCancel(ctx)
	defer stop() // the simulated kubelets go with the step
	d.say("==> Applications judge the rollout: a Deployment reads the bundle %s in each member; the hub restarts it for each revision and waits until it is available (docs/how-to/restart-applications.md)", appName)
	d.say("    (the members' Pods are simulated by kwok: a Pod is ready unless the value it read is %q)", kwok.BadValue)
	for _, m := range d.members {
		if err := kwok.Start(kctx, m.Plane, m.Client); err != nil {
			return err
		}
		if err := m.Client.Create(ctx, kwok.Deployment(metav1.NamespaceDefault, appName, appName, configbundlev1alpha1.MessageKey)); err != nil {
			return fmt.Errorf("creating Deployment %s in %s: %w", appName, m.Name, err)
		}
	}
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: appName}, Spec: hubv1alpha1.FleetBundleSpec{
		ClusterSelector: &metav1.LabelSelector{},
		Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: appGood}},
		Rollout: &hubv1alpha1.RolloutStrategy{
			Stages:    []hubv1alpha1.RolloutStage{{Name: canaryRing, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{ringKey: canaryRing}}}},
			Workloads: hubv1alpha1.WorkloadsRestart, WorkloadTimeout: &metav1.Duration{Duration: appTimeout},
		},
	}}
	d.say("$ kubectl apply -f %s.yaml    # spec.rollout: workloads Restart, workloadTimeout %s, stage %s then the rest; message %q", appName, appTimeout, canaryRing, appGood)
	if err := d.fl.Hub.Create(ctx, fb); err != nil {
		return fmt.Errorf("creating FleetBundle %s: %w", appName, err)
	}
	if err := d.poll(ctx, "revision 1 to roll out, each Deployment restarted for it", d.appRolledOut(fb, 1)); err != nil {
		return err
	}
	d.say("    revision 1 rolled out: each member's Deployment %s restarted once (configbundle.dev/restartedFor: \"1\") and available", appName)
	if err := d.setAppValue(ctx, fb, kwok.BadValue); err != nil {
		return err
	}
	start := time.Now()
	if err := d.poll(ctx, "the rollout to halt on the canary's Deployment", d.appPhaseIs(fb, 2, hubv1alpha1.RolloutHalted)); err != nil {
		return err
	}
	if err := d.showAppRollout(ctx, fb, time.Since(start)); err != nil {
		return err
	}
	if err := d.setAppValue(ctx, fb, appFixed); err != nil {
		return err
	}
	if err := d.poll(ctx, "the fixed value to roll out", d.appRolledOut(fb, 3)); err != nil {
		return err
	}
	d.say("    revision 3 rolled out stage by stage; each Deployment restarted for it once, and available")
	return d.removeApp(ctx, fb)
}

// removeApp deletes the workloads step's FleetBundle, waits until the hub removed its bundles,
// and deletes the Deployments: the steps after it count the bundles of the others.
func (d *demo) removeApp(ctx context.Context, fb *hubv1alpha1.FleetBundle) error {
	d.say("$ kubectl delete fleetbundle %s    # and the Deployments: the tour goes on without them", appName)
	if err := d.fl.Hub.Delete(ctx, fb); err != nil {
		return fmt.Errorf("deleting FleetBundle %s: %w", appName, err)
	}
	if err := d.poll(ctx, "FleetBundle "+appName+" to be gone", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), &hubv1alpha1.FleetBundle{})), nil
	}); err != nil {
		return err
	}
	for _, m := range d.members {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: appName}}
		if err := client.IgnoreNotFound(m.Client.Delete(ctx, dep)); err != nil {
			return fmt.Errorf("deleting Deployment %s in %s: %w", appName, m.Name, err)
		}
	}
	return nil
}

// setAppValue patches the message of the workloads step's FleetBundle.
func (d *demo) setAppValue(ctx context.Context, fb *hubv1alpha1.FleetBundle, value string) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"message":%q}}}}`, value)
	d.say("$ kubectl patch fleetbundle %s --type merge -p '%s'", appName, patch)
	if err := d.fl.Hub.Patch(ctx, fb.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("patching FleetBundle %s: %w", appName, err)
	}
	return nil
}

// appPhaseIs is whether the workloads step's rollout of revision rev is in phase.
func (d *demo) appPhaseIs(fb *hubv1alpha1.FleetBundle, rev int64, phase hubv1alpha1.RolloutPhase) wait.ConditionWithContextFunc {
	return func(ctx context.Context) (bool, error) {
		got := &hubv1alpha1.FleetBundle{}
		if err := d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), got); err != nil {
			return false, nil
		}
		st := got.Status
		return st.ObservedGeneration == got.Generation && st.UpdateRevision == rev && st.Rollout != nil && st.Rollout.Phase == phase, nil
	}
}

// appRolledOut is whether revision rev is Complete and each member's Deployment was restarted for
// it.
func (d *demo) appRolledOut(fb *hubv1alpha1.FleetBundle, rev int64) wait.ConditionWithContextFunc {
	complete := d.appPhaseIs(fb, rev, hubv1alpha1.RolloutComplete)
	return func(ctx context.Context) (bool, error) {
		if ok, err := complete(ctx); !ok || err != nil {
			return ok, err
		}
		for _, m := range d.members {
			dep := &appsv1.Deployment{}
			if err := m.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: appName}, dep); err != nil ||
				dep.Spec.Template.Annotations[hubv1alpha1.RestartedForAnnotation] != fmt.Sprint(rev) {
				return false, nil
			}
		}
		return true, nil
	}
}

// showAppRollout prints where the halted rollout stands, as `hub rollout status` does.
func (d *demo) showAppRollout(ctx context.Context, fb *hubv1alpha1.FleetBundle, took time.Duration) error {
	got := &hubv1alpha1.FleetBundle{}
	if err := d.fl.Hub.Get(ctx, client.ObjectKeyFromObject(fb), got); err != nil {
		return err
	}
	ro := got.Status.Rollout
	d.say("    halted %s after the patch: the canary's Pod refused the value (CrashLoopBackOff), so its Deployment never became available", took.Round(100*time.Millisecond))
	d.say("$ hub rollout status %s", appName)
	d.say("    stage %s, phase %s: %s", ro.Stage, ro.Phase, ro.Message)
	for _, m := range ro.Workloads {
		for _, c := range m.Consumers {
			d.say("      member %s: %s %s %s (%s)", m.Cluster, c.Kind, c.Name, c.State, c.Message)
		}
	}
	for _, m := range d.members[1:] {
		dep := &appsv1.Deployment{}
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: appName}, dep); err != nil {
			return err
		}
		if got := dep.Spec.Template.Annotations[hubv1alpha1.RestartedForAnnotation]; got != "1" {
			return fmt.Errorf("member %s: Deployment %s was restarted for revision %s during the halt", m.Name, appName, got)
		}
	}
	d.say("    the other members still hold revision 1, and their Deployments were not restarted")
	return nil
}
