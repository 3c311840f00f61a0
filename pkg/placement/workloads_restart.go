package placement

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/rollout"
)

// workloadsSyncRetry is how soon a pair whose consumers must be restarted is tried again while
// the member's workloads are not listed yet.
const workloadsSyncRetry = time.Second

// restart follows a placement that succeeded (err nil, no outcome): if the FleetBundle's rollout
// restarts workloads, each consumer of the bundle the member now holds that was not restarted
// for its revision is, with one patch of its pod template's RestartedForAnnotation. A consumer
// restarted for another revision (a rollback, say) is restarted again.
func (s *scope) restart(ctx context.Context, res ctrl.Result, err error) (ctrl.Result, error) {
	if err != nil || s.outcome.Reason != "" || s.fb.Spec.Rollout == nil || s.fb.Spec.Rollout.Workloads != hubv1alpha1.WorkloadsRestart {
		return res, err // the status controller releases a watch no longer needed
	}
	w := s.r.workloads.workloadsOf(ctx, s.pair.member, s.member, s.fb)
	if !w.Known {
		return ctrl.Result{RequeueAfter: workloadsSyncRetry}, nil
	}
	revision := rollout.HeldRevision(s.want)
	want := strconv.FormatInt(revision, 10)
	var errs []error
	for _, c := range w.Consumers {
		if c.RestartedFor == want || s.r.ledger.wasRestarted(s.pair, c.Kind+"/"+c.Name, revision) {
			continue // restarted already (the cache may not have seen the patch yet)
		}
		o, err := workloadObject(c, s.fb.Namespace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		err = s.member.GetClient().Patch(ctx, o, client.RawPatch(types.MergePatchType, restartPatch(revision)), client.FieldOwner(s.r.opts.FieldOwner))
		switch {
		case apierrors.IsNotFound(err):
			continue // gone
		case err != nil:
			errs = append(errs, fmt.Errorf("restarting %s %s: %w", c.Kind, c.Name, err))
			continue
		}
		s.r.ledger.noteRestarted(s.pair, c.Kind+"/"+c.Name, revision)
		ctrl.LoggerFrom(ctx).Info("Restarted workload", "kind", c.Kind, "workload", c.Name, "revision", revision)
	}
	return res, errors.Join(errs...)
}
