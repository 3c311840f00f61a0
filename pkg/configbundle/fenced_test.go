package configbundle

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
)

func TestFencedRequestsWaitForTheirMembersFence(t *testing.T) {
	t.Parallel()
	req := func(member, name string) mcreconcile.Request {
		return mcreconcile.Request{ClusterName: multicluster.ClusterName(member), Request: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}}
	}
	names := func(reqs []mcreconcile.Request) []string {
		var out []string
		for _, r := range reqs {
			out = append(out, string(r.ClusterName)+"/"+r.Name)
		}
		slices.Sort(out)
		return out
	}
	var f fencedRequests
	f.add(req("a", "x"))
	f.add(req("a", "x")) // held once
	f.add(req("a", "y"))
	f.add(req("b", "z"))
	f.add(req("c", "w"))
	f.forget("c")

	steps := []struct {
		writable []string
		want     []string
	}{
		{writable: nil, want: nil},
		{writable: []string{"b", "c"}, want: []string{"b/z"}},
		{writable: []string{"b"}, want: nil}, // taken once
		{writable: []string{"a", "b", "c"}, want: []string{"a/x", "a/y"}},
		{writable: []string{"a", "b", "c"}, want: nil},
	}
	for i, s := range steps {
		got := names(f.takeWritable(func(m string) bool { return slices.Contains(s.writable, m) }))
		if !slices.Equal(got, s.want) {
			t.Errorf("step %d: writable %v: got %v, want %v", i, s.writable, got, s.want)
		}
	}
}
