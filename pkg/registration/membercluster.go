package registration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

const (
	// pollInterval is the pause between two reads of the MemberCluster.
	pollInterval = 250 * time.Millisecond
	// labelSettle bounds how long Register watches a MemberCluster it created for the hub to take
	// it over. A hub that has not yet seen the new Secret deletes a MemberCluster without one;
	// Register applies the labels again until the hub has reported on the MemberCluster, or until
	// labelSettle has passed (a hub that is not running deletes nothing).
	labelSettle = 5 * time.Second
)

// labelMemberCluster applies Labels to the MemberCluster Name, creating it if the hub has not
// (yet), and then makes sure they survive the hub's first look at it.
func (o *options) labelMemberCluster(ctx context.Context, hub client.Client) error {
	getErr := hub.Get(ctx, client.ObjectKey{Name: o.Name}, &hubv1alpha1.MemberCluster{})
	if client.IgnoreNotFound(getErr) != nil {
		return fmt.Errorf("reading MemberCluster %s: %w", o.Name, getErr)
	}
	if err := o.applyMemberCluster(ctx, hub); err != nil {
		return err
	}
	if getErr == nil {
		return nil // it existed: the hub does not delete it while the Secret exists
	}
	settle, cancel := context.WithTimeout(ctx, labelSettle)
	defer cancel()
	_, err := o.pollMemberCluster(settle, hub, func(mc *hubv1alpha1.MemberCluster) bool {
		return meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition) != nil
	})
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil // no hub reported on it: none is running, or it is slow; the labels are there
	}
	return err
}

// applyMemberCluster server-side applies the MemberCluster Name with Labels and spec.secretRef.
func (o *options) applyMemberCluster(ctx context.Context, hub client.Client) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hubv1alpha1.GroupVersion.WithKind("MemberCluster"))
	u.SetName(o.Name)
	u.SetLabels(o.Labels)
	u.Object["spec"] = map[string]any{"secretRef": map[string]any{"namespace": o.SecretNamespace, "name": o.Name}}
	if err := apply(ctx, hub, client.ApplyConfigurationFromUnstructured(u)); err != nil {
		return fmt.Errorf("applying the labels of MemberCluster %s on the hub (%s): %w", o.Name, o.Hub.Host, err)
	}
	return nil
}

// pollMemberCluster reads the MemberCluster Name until done holds for it, applying Labels again
// whenever it is missing or lacks them, and returns the last one read (nil if none). It returns
// the context's error when the context ends first.
func (o *options) pollMemberCluster(ctx context.Context, hub client.Client, done func(*hubv1alpha1.MemberCluster) bool) (*hubv1alpha1.MemberCluster, error) {
	var last *hubv1alpha1.MemberCluster
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		mc := &hubv1alpha1.MemberCluster{}
		err := hub.Get(ctx, client.ObjectKey{Name: o.Name}, mc)
		switch {
		case apierrors.IsNotFound(err):
			last = nil
		case err != nil:
			return false, nil // retried until the context ends
		default:
			last = mc
		}
		if o.Labels != nil && (last == nil || !hasLabels(last.Labels, o.Labels)) {
			return false, o.applyMemberCluster(ctx, hub)
		}
		return last != nil && done(last), nil
	})
	return last, err
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// WaitReady waits until the MemberCluster opts.Name on the hub is Ready, or ctx ends, and
// returns it. With opts.Labels it applies them again if the MemberCluster lacks them. Only
// Name, Hub, SecretNamespace, SecretLabel and Labels are used. The error of a member that did not
// become Ready in time says why, as its MemberCluster does.
func WaitReady(ctx context.Context, opts Options) (*hubv1alpha1.MemberCluster, error) {
	opts.defaults()
	if errs := validation.IsDNS1123Subdomain(opts.Name); len(errs) > 0 {
		return nil, fmt.Errorf("waiting for member: invalid member name %q: %s", opts.Name, strings.Join(errs, "; "))
	}
	if opts.Hub == nil {
		return nil, errors.New("waiting for member: no credentials for the hub cluster (Options.Hub is nil)")
	}
	if err := opts.validateHub(); err != nil {
		return nil, fmt.Errorf("waiting for member %q: %w", opts.Name, err)
	}
	hub, err := newClient(opts.Hub)
	if err != nil {
		return nil, fmt.Errorf("building a client for the hub: %w", err)
	}
	o := &options{Options: opts}
	began := time.Now()
	mc, err := o.pollMemberCluster(ctx, hub, func(mc *hubv1alpha1.MemberCluster) bool {
		return meta.IsStatusConditionTrue(mc.Status.Conditions, hubv1alpha1.ReadyCondition)
	})
	if err != nil {
		return mc, fmt.Errorf("member %q is not Ready after %s: %s: %w", o.Name, time.Since(began).Round(time.Second), o.why(mc), err)
	}
	return mc, nil
}

// why says why the MemberCluster mc (nil: none) is not Ready.
func (o *options) why(mc *hubv1alpha1.MemberCluster) string {
	if mc == nil {
		return fmt.Sprintf("there is no MemberCluster %s on the hub: is the hub running, and watching Secrets in %s labelled %s=true?", o.Name, o.SecretNamespace, o.SecretLabel)
	}
	c := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition)
	if c == nil {
		return fmt.Sprintf("MemberCluster %s has no Ready condition yet: is the hub running?", o.Name)
	}
	return fmt.Sprintf("Ready=%s, reason %s: %s", c.Status, c.Reason, c.Message)
}
