package demo

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/fleet"
)

// guardedName names the guard step's ConfigBundle and ConfigMap, in the namespace default.
const guardedName = "guarded"

// guard shows a ConfigBundle whose driftPolicy is Guard: its member refuses a hand edit of the
// ConfigMap, also while the hub process is stopped, and deleting the bundle still removes it.
func (d *demo) guard(ctx context.Context) error {
	m := d.members[0]
	d.say("==> Guard: ConfigBundle %s in %s with spec.driftPolicy: Guard; the member itself refuses hand edits of its ConfigMap", guardedName, m.Name)
	b := &configbundlev1alpha1.ConfigBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: guardedName},
		Spec:       configbundlev1alpha1.ConfigBundleSpec{Message: "guarded by the member", DriftPolicy: configbundlev1alpha1.DriftPolicyGuard},
	}
	if err := m.Client.Create(ctx, b); err != nil {
		return fmt.Errorf("creating ConfigBundle %s in %s: %w", guardedName, m.Name, err)
	}
	if err := d.poll(ctx, "the member to refuse an edit of the guarded ConfigMap", func(ctx context.Context) (bool, error) {
		err := editGuarded(ctx, m.Client, client.DryRunAll)
		return err != nil && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)), nil
	}); err != nil {
		return err
	}
	d.say("==> Stopping the hub process (SIGTERM)")
	d.fl.StopHub(fleet.HubName, syscall.SIGTERM)
	err := editGuarded(ctx, m.Client)
	d.say("$ kubectl --context %s edit configmap %s    # the hub is stopped\n    %v", m.Name, guardedName, err)
	if err == nil {
		return errors.New("the member accepted a hand edit of a guarded ConfigMap")
	}
	d.say("$ kubectl --context %s delete configbundle %s    # the garbage collector still removes its ConfigMap", m.Name, guardedName)
	if err := m.Client.Delete(ctx, b); err != nil {
		return err
	}
	if err := d.poll(ctx, "the guarded ConfigMap to be gone", func(ctx context.Context) (bool, error) {
		err := m.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: guardedName}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		return err
	}
	d.say("==> Starting the hub process again")
	if _, err := d.fl.StartHub(ctx, fleet.HubName); err != nil {
		return err
	}
	if err := d.fl.WaitReported(ctx, fleet.HubName); err != nil {
		return err
	}
	return d.poll(ctx, "every member to be Ready again", d.allMembers(hubv1alpha1.ConnectedReason))
}

// editGuarded changes the guarded ConfigMap by hand, as kubectl edit does.
func editGuarded(ctx context.Context, c client.Client, opts ...client.UpdateOption) error {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: guardedName}, cm); err != nil {
		return err
	}
	if cm.Labels[configbundlev1alpha1.GuardLabel] != "true" {
		return fmt.Errorf("ConfigMap %s is not labelled %s yet", guardedName, configbundlev1alpha1.GuardLabel)
	}
	cm.Data["message"] = "edited by hand"
	return c.Update(ctx, cm, append(opts, client.FieldOwner("kubectl-edit"))...)
}
