package configbundle

import (
	"slices"
	"time"
)

// A fight: another writer keeps changing a managed ConfigMap, and the hub keeps healing it.
const (
	// FightHeals is how many heals of one bundle's ConfigMap within FightWindow make a fight.
	// The reconciler reports a fight once, with a Warning Event (configbundlev1alpha1.FightingWriterEvent)
	// that names what keeps changing, a log line and configbundle_fights_total; it keeps healing.
	FightHeals = 10

	// FightWindow is the window of FightHeals. A fight is over when the ConfigMap has gone a
	// whole FightWindow without a heal; the next fight is reported again.
	FightWindow = time.Minute
)

// fight is what the ledger keeps of a bundle's recent heals, to tell a fight.
type fight struct {
	heals    []time.Time // the last FightHeals heals at most, oldest first
	drift    []string    // what drifted in the heals since the ConfigMap was last quiet, sorted
	reported bool        // this fight was reported
}

// fightReport is what a fight is reported with.
type fightReport struct {
	drift  []string      // what keeps changing, sorted
	within time.Duration // the time the last FightHeals heals took
}

// heal notes a heal of drift at at, and returns the report of the fight this heal makes, if it is
// not reported yet; nil otherwise.
func (f *fight) heal(at time.Time, drift []string) *fightReport {
	if n := len(f.heals); n > 0 && at.Sub(f.heals[n-1]) > FightWindow {
		*f = fight{} // quiet for a whole window: the last fight, if any, is over
	}
	f.heals = append(f.heals, at)
	if len(f.heals) > FightHeals {
		f.heals = slices.Delete(f.heals, 0, len(f.heals)-FightHeals)
	}
	for _, d := range drift {
		if i, found := slices.BinarySearch(f.drift, d); !found {
			f.drift = slices.Insert(f.drift, i, d)
		}
	}
	if f.reported || len(f.heals) < FightHeals || at.Sub(f.heals[0]) > FightWindow {
		return nil
	}
	f.reported = true
	return &fightReport{drift: slices.Clone(f.drift), within: at.Sub(f.heals[0])}
}
