package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	fixture "configbundle.dev/hub/internal/testing/fleet"
)

// The revision history phase: cfg.HistoryTenants tenants, each a namespace with one FleetBundle
// that selects no member, at the bounds of what a tenant's history may cost the hub:
// revisionHistoryLimit MaxRevisionHistoryLimit and as many templates and one more, each with a
// message near the 1 MiB a message holds. The hub keeps at most MaxRevisionHistoryBytes of
// definitions per FleetBundle besides those in use; its resident memory once every history is
// pruned, and at its peak, must stay under historyGoalRSS.
const (
	// historyTemplates are the templates applied to each tenant's FleetBundle, one revision each.
	historyTemplates = hubv1alpha1.MaxRevisionHistoryLimit + 1
	// historyMessageBytes is the size of each template's message.
	historyMessageBytes = 1_000_000
	// historyName names the tenants' FleetBundles; historyNSPrefix their namespaces.
	historyName, historyNSPrefix = "history", "tenant-"
	// historyGoalRSS bounds the hub's resident memory with every tenant at the bounds.
	historyGoalRSS = 512 << 20
)

// historyResults are the figures of the revision history phase.
type historyResults struct {
	// Tenants had their FleetBundle's historyTemplates revisions within Took.
	Tenants int
	Took    time.Duration
	// Kept counts the revisions kept, over all tenants; MostBytes is the most stored definitions
	// of one tenant, in bytes.
	Kept      int
	MostBytes float64
	// MemBefore and MemAfter are the hub's memory before the first tenant and after the last
	// history is pruned; PeakRSS is the hub's largest resident set meanwhile (it is restarted
	// for the phase).
	MemBefore, MemAfter costPoint
	PeakRSS             float64
}

// measureHistory runs the revision history phase and removes what it created.
func (f *fleet) measureHistory(ctx context.Context, cfg benchConfig, res *results, say func(string, ...any)) error {
	if cfg.HistoryTenants < 1 {
		return nil
	}
	f.stopHub() // restarted, so that its peak resident set is this phase's
	if err := f.startHub(ctx); err != nil {
		return err
	}
	hr := &res.History
	var err error
	if hr.MemBefore, err = f.cost(ctx, len(f.Members()), 0, 0); err != nil {
		return err
	}
	say("history: %d tenants, each %d templates of a %d-byte message", cfg.HistoryTenants, historyTemplates, historyMessageBytes)
	start := time.Now()
	err = parallel(ctx, cfg.HistoryTenants, 4, func(ctx context.Context, i int) error { return f.fillHistory(ctx, historyNS(i)) })
	if err == nil {
		err = f.waitHistoriesPruned(ctx, cfg.HistoryTenants, hr)
	}
	if err == nil {
		hr.Took, hr.Tenants = time.Since(start), cfg.HistoryTenants
		hr.MemAfter, err = f.cost(ctx, len(f.Members()), 0, 0)
	}
	if err == nil {
		hr.PeakRSS, err = peakRSSBytes(f.hub().Pid())
	}
	say("history: removing the FleetBundles and their revisions")
	return errors.Join(err, f.cleanupHistory(ctx, cfg.HistoryTenants))
}

func historyNS(i int) string { return fmt.Sprintf("%s%02d", historyNSPrefix, i) }

// historyMessage is the message of template i: historyMessageBytes, distinct for each i.
func historyMessage(i int) string {
	prefix := fmt.Sprintf("template %d ", i)
	return prefix + strings.Repeat("x", historyMessageBytes-len(prefix))
}

// fillHistory creates the tenant's FleetBundle and changes its template until it has
// historyTemplates revisions, waiting for each to be the FleetBundle's updateRevision.
func (f *fleet) fillHistory(ctx context.Context, ns string) error {
	if err := fixture.EnsureNamespace(ctx, f.Hub, ns); err != nil {
		return err
	}
	fb := fixture.NewFleetBundle(ns, historyName, map[string]string{"bench-history": "nobody"}, configbundlev1alpha1.ConfigBundleSpec{Message: historyMessage(1)})
	fb.Spec.RevisionHistoryLimit = ptr.To[int32](hubv1alpha1.MaxRevisionHistoryLimit)
	if err := f.Hub.Create(ctx, fb); err != nil {
		return fmt.Errorf("creating FleetBundle %s/%s: %w", ns, historyName, err)
	}
	for i := 1; i <= historyTemplates; i++ {
		if i > 1 {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := f.Hub.Get(ctx, client.ObjectKeyFromObject(fb), fb); err != nil {
					return err
				}
				fb.Spec.Template.Spec.Message = historyMessage(i)
				return f.Hub.Update(ctx, fb)
			})
			if err != nil {
				return fmt.Errorf("changing the template of FleetBundle %s/%s: %w", ns, historyName, err)
			}
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
			got := &hubv1alpha1.FleetBundle{}
			err := f.Hub.Get(ctx, client.ObjectKeyFromObject(fb), got)
			return err == nil && got.Status.ObservedGeneration == got.Generation && got.Status.UpdateRevision == int64(i), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for revision %d of FleetBundle %s/%s: %w", i, ns, historyName, err)
		}
	}
	return nil
}

// waitHistoriesPruned waits until every tenant's revisions are within the bounds: at most
// revisionHistoryLimit besides the one in use, and at most MaxRevisionHistoryBytes of
// definitions besides it; it records what is kept.
func (f *fleet) waitHistoriesPruned(ctx context.Context, tenants int, hr *historyResults) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		hr.Kept, hr.MostBytes = 0, 0
		for i := range tenants {
			list := &appsv1.ControllerRevisionList{}
			if err := f.Hub.List(ctx, list, client.InNamespace(historyNS(i)), client.HasLabels{hubv1alpha1.FleetBundleLabel}); err != nil {
				return false, nil
			}
			size := 0
			for _, r := range list.Items {
				size += len(r.Data.Raw)
			}
			if len(list.Items) > hubv1alpha1.MaxRevisionHistoryLimit+1 || size > hubv1alpha1.MaxRevisionHistoryBytes+historyMessageBytes+4096 {
				return false, nil
			}
			hr.Kept += len(list.Items)
			hr.MostBytes = max(hr.MostBytes, float64(size))
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the tenants' histories to be pruned within the bounds: %w", err)
	}
	return nil
}

// cleanupHistory deletes the tenants' FleetBundles and their revisions (the hub cluster has no
// garbage collector).
func (f *fleet) cleanupHistory(ctx context.Context, tenants int) error {
	var errs []error
	for i := range tenants {
		ns := historyNS(i)
		fb := &hubv1alpha1.FleetBundle{}
		fb.Namespace, fb.Name = ns, historyName
		errs = append(errs, client.IgnoreNotFound(f.Hub.Delete(ctx, fb)),
			f.Hub.DeleteAllOf(ctx, &appsv1.ControllerRevision{}, client.InNamespace(ns), client.HasLabels{hubv1alpha1.FleetBundleLabel}))
	}
	return errors.Join(errs...)
}

// missedGoals names the revision history goals this run missed.
func (hr *historyResults) missedGoals() []string {
	if hr.PeakRSS >= historyGoalRSS {
		return []string{fmt.Sprintf("hub RSS under %s with every tenant at the bounds (peak %s)", mib(historyGoalRSS), mib(hr.PeakRSS))}
	}
	return nil
}

func (r *results) printHistory(p printer, cfg benchConfig) {
	hr := &r.History
	if cfg.HistoryTenants < 1 {
		return
	}
	p("\n8. Revision history: %d tenants, each a namespace with a FleetBundle selecting no member, revisionHistoryLimit %d, %d templates of a %d-byte message",
		hr.Tenants, hubv1alpha1.MaxRevisionHistoryLimit, historyTemplates, historyMessageBytes)
	p("| tenants | revisions kept (all tenants) | stored definitions, most of one tenant | all applied and pruned after | hub RSS before -> after (peak) | Go heap before -> after |")
	p("|---|---|---|---|---|---|")
	p("| %d | %d | %s | %s | %s -> %s (%s) | %s -> %s |", hr.Tenants, hr.Kept, mib(hr.MostBytes), hr.Took.Round(100*time.Millisecond),
		mib(hr.MemBefore.RSS), mib(hr.MemAfter.RSS), mib(hr.PeakRSS), mib(hr.MemBefore.Heap), mib(hr.MemAfter.Heap))
	if missed := hr.missedGoals(); len(missed) > 0 {
		p("history goals missed: %s", strings.Join(missed, "; "))
	} else {
		p("history goals missed: none (hub RSS under %s with every tenant at the bounds)", mib(historyGoalRSS))
	}
}
