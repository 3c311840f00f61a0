package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// HealPoll is how often Tampering reads a tampered ConfigMap back.
const HealPoll = 10 * time.Millisecond

// CreateBundles creates n bundles named prefix-00000 and on in namespace ns (which must exist),
// parallel at a time, all with message, as fast as the client allows: a backlog for the hub.
func CreateBundles(ctx context.Context, c client.Client, ns, prefix, message string, n, parallel int) error {
	names := make(chan string)
	errs := make([]error, parallel)
	var wg sync.WaitGroup
	for i := range parallel {
		wg.Go(func() {
			for name := range names {
				if err := c.Create(ctx, NewBundle(ns, name, message)); err != nil && errs[i] == nil {
					errs[i] = fmt.Errorf("creating bundle %s/%s: %w", ns, name, err)
				}
			}
		})
	}
	for i := range n {
		names <- fmt.Sprintf("%s-%05d", prefix, i)
	}
	close(names)
	wg.Wait()
	return errors.Join(errs...)
}

// DeleteBundles deletes every bundle of namespace ns and every ConfigMap there (members of the
// fixture run no garbage collector unless asked to), and waits until no bundle is left, at most
// timeout. A deletion of thousands may outlast the API server's request timeout: it goes on in
// the API server, and is asked for again until done.
func DeleteBundles(ctx context.Context, c client.Client, ns string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		last = errors.Join(
			c.DeleteAllOf(ctx, &configbundlev1alpha1.ConfigBundle{}, client.InNamespace(ns)),
			c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns)))
		list := &configbundlev1alpha1.ConfigBundleList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil {
			last = errors.Join(last, err)
			return false, nil
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("deleting the bundles of %s: %w (last: %w)", ns, err, last)
	}
	return nil
}

// Tampering tampers with managed ConfigMaps, one at a time and one every period, and measures
// each heal: from the tamper to the ConfigMap read back (every HealPoll) with the message its
// bundle wants. Stop ends it.
type Tampering struct {
	cancel context.CancelFunc
	done   chan struct{}
	heals  []time.Duration
	err    error
}

// StartTampering starts tampering with the ConfigMaps of keys in turn, through c; desired says
// the message each must be healed back to.
func StartTampering(c client.Client, keys []client.ObjectKey, desired func(client.ObjectKey) string, period time.Duration) *Tampering {
	ctx, cancel := context.WithCancel(context.Background())
	tp := &Tampering{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tp.done)
		pace := time.NewTicker(period)
		defer pace.Stop()
		for i := 0; ; i++ {
			if !tp.tamperOnce(ctx, c, keys[i%len(keys)], desired) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-pace.C:
			}
		}
	}()
	return tp
}

// tamperOnce tampers with the ConfigMap of key and waits until it is healed; false once
// stopped, or on a failed tamper.
func (tp *Tampering) tamperOnce(ctx context.Context, c client.Client, key client.ObjectKey, desired func(client.ObjectKey) string) bool {
	tampered := time.Now()
	if err := Tamper(ctx, c, key, "tampered"); err != nil {
		if ctx.Err() == nil {
			tp.err = err
		}
		return false
	}
	poll := time.NewTicker(HealPoll)
	defer poll.Stop()
	for {
		if msg, err := Message(ctx, c, key); err == nil && msg == desired(key) {
			tp.heals = append(tp.heals, time.Since(tampered))
			return true
		}
		select {
		case <-ctx.Done():
			tp.heals = append(tp.heals, time.Since(tampered)) // not healed yet: at least this long
			return false
		case <-poll.C:
		}
	}
}

// Stop stops tampering and returns the heal latencies, in order, the last one a lower bound if
// that heal had not come yet; and the error of a failed tamper, if any.
func (tp *Tampering) Stop() ([]time.Duration, error) {
	tp.cancel()
	<-tp.done
	return tp.heals, tp.err
}

// HealSummary is the median and the maximum of heal latencies, for a log line.
func HealSummary(heals []time.Duration) string {
	if len(heals) == 0 {
		return "none"
	}
	s := slices.Sorted(slices.Values(heals))
	return fmt.Sprintf("p50 %s, max %s", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
