package configbundle

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

// fencedRetry is how often the members whose fence refused a reconcile are looked at again
// (Replica.MayWrite, judged in memory): a member whose fence is back (the hub cluster answers
// again) has the refused bundles queued again within this long.
const fencedRetry = 250 * time.Millisecond

// fencedRequests holds, by member, the requests this replica could not reconcile because it
// may not write to the member now (its Lease, or the leader's, lapsed in an outage of the hub
// cluster). They wait here, not in the work queue, so that a fenced member with thousands of
// bundles costs nothing but one look at its fence every fencedRetry.
type fencedRequests struct {
	mu       sync.Mutex // guards byMember
	byMember map[multicluster.ClusterName]map[mcreconcile.Request]struct{}
}

// add holds req until its member's fence is back.
func (f *fencedRequests) add(req mcreconcile.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byMember == nil {
		f.byMember = map[multicluster.ClusterName]map[mcreconcile.Request]struct{}{}
	}
	reqs := f.byMember[req.ClusterName]
	if reqs == nil {
		reqs = map[mcreconcile.Request]struct{}{}
		f.byMember[req.ClusterName] = reqs
	}
	reqs[req] = struct{}{}
}

// takeWritable removes and returns the requests of the members that mayWrite now allows.
func (f *fencedRequests) takeWritable(mayWrite func(member string) bool) []mcreconcile.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []mcreconcile.Request
	for member, reqs := range f.byMember {
		if !mayWrite(string(member)) {
			continue
		}
		for req := range reqs {
			out = append(out, req)
		}
		delete(f.byMember, member)
	}
	return out
}

// forget drops the requests of a member that left: its bundles are listed again if it comes
// back.
func (f *fencedRequests) forget(member multicluster.ClusterName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byMember, member)
}

// fencedSource queues again, every fencedRetry, the held requests of the members whose fence is
// back.
func (r *Reconciler) fencedSource() source.TypedSource[mcreconcile.Request] {
	return source.TypedFunc[mcreconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[mcreconcile.Request]) error {
		go func() {
			t := time.NewTicker(fencedRetry)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				for _, req := range r.fenced.takeWritable(r.opts.Replica.MayWrite) {
					q.Add(req)
				}
			}
		}()
		return nil
	})
}
