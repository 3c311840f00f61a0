package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
)

// Who wrote what is counted on the API servers' side: every control plane of the benchmark logs
// the writes it serves (controlplane.Options.AuditWrites), and each write is told apart by its
// user agent.
const (
	// benchUserAgent is the user agent of the benchmark's own clients (and of the floor's).
	benchUserAgent = "configbundle-bench"
	// hubPlane names the hub cluster's control plane.
	hubPlane = "hub"
	// maxListed is the most unplanned steady-state writes listed one by one.
	maxListed = 20
)

// servedWrite is a write one of the fleet's control planes served.
type servedWrite struct {
	// Plane is the control plane's name: hubPlane, or the member's.
	Plane string
	controlplane.Write
}

// what names what was written: resource, and subresource if any.
func (w servedWrite) what() string {
	if w.Subresource == "" {
		return w.Resource
	}
	return w.Resource + "/" + w.Subresource
}

// object names the object written.
func (w servedWrite) object() string {
	if w.Namespace == "" {
		return w.Name
	}
	return w.Namespace + "/" + w.Name
}

// sameObject reports whether w and o wrote the same object of the same control plane.
func (w servedWrite) sameObject(o servedWrite) bool {
	return w.Plane == o.Plane && w.Resource == o.Resource && w.Namespace == o.Namespace && w.Name == o.Name
}

// describe renders the write on one line, its time relative to zero.
func (w servedWrite) describe(zero time.Time) string {
	return fmt.Sprintf("%+.3fs %s %s %s %s -> %d", w.At.Sub(zero).Seconds(), w.Plane, w.Verb, w.what(), w.object(), w.Code)
}

// byHub reports whether the hub made the write: whoever wrote, but the benchmark (and its floor)
// and the kube-apiserver itself, in a benchmark where nobody else writes, so that no writer goes
// unnoticed. The user agent tells them apart: the benchmark's clients are benchUserAgent (the
// control planes' setup, CRDs, client-go's default of this process), the kube-apiserver's own
// requests "kube-apiserver/..." (user system:apiserver). The hub's clients, of the members and
// of the hub cluster, begin with hubv1alpha1.UserAgentPrefix.
func (w servedWrite) byHub() bool {
	return w.UserAgent != benchUserAgent && w.UserAgent != rest.DefaultKubernetesUserAgent() &&
		!strings.HasPrefix(w.UserAgent, "kube-apiserver/") && w.User != "system:apiserver"
}

// planned reports whether the write is the one the hub makes in steady state by design: the
// Fleet's heartbeat (status.heartbeatTime, every --heartbeat-interval).
func (w servedWrite) planned() bool {
	return w.Plane == hubPlane && w.Resource == "fleets" && w.Subresource == "status" && w.Verb == "update" &&
		w.Name == hubv1alpha1.FleetName
}

// bindingMembers reports whether the write is a ClusterSetBinding's status, which lists the
// members its set selects with their labels: a MemberCluster's label change rewrites it.
func (w servedWrite) bindingMembers() bool {
	return w.Plane == hubPlane && w.Resource == "clustersetbindings" && w.Subresource == "status"
}

// servedWrites returns the writes the hub's control plane (named hubPlane) and the members'
// served so far, ordered by time.
func (f *fleet) servedWrites() ([]servedWrite, error) {
	planes := append([]*controlplane.ControlPlane{f.HubPlane}, f.memberPlanes()...)
	var all []servedWrite
	for _, cp := range planes {
		writes, err := cp.Writes()
		if err != nil {
			return nil, fmt.Errorf("reading the writes served by %s: %w", cp.Name, err)
		}
		for _, w := range writes {
			all = append(all, servedWrite{Plane: cp.Name, Write: w})
		}
	}
	slices.SortStableFunc(all, func(a, b servedWrite) int { return a.At.Compare(b.At) })
	return all, nil
}

func (f *fleet) memberPlanes() []*controlplane.ControlPlane {
	members := f.Members()
	out := make([]*controlplane.ControlPlane, 0, len(members))
	for _, m := range members {
		out = append(out, m.Plane)
	}
	return out
}

// hubWritesIn returns the hub's writes in [from, to).
func hubWritesIn(all []servedWrite, from, to time.Time) []servedWrite {
	var out []servedWrite
	for _, w := range all {
		if !w.At.Before(from) && w.At.Before(to) && w.byHub() {
			out = append(out, w)
		}
	}
	return out
}

// writeGroup counts the writes of one control plane, resource, verb and user agent.
type writeGroup struct {
	Plane, What, Verb, UserAgent string
	Count                        int
	Codes                        map[int]int
	Planned                      bool
}

// groupWrites counts writes by control plane, resource/subresource, verb and user agent, the hub
// cluster's first, then the members' by name.
func groupWrites(writes []servedWrite) []writeGroup {
	index := map[[4]string]int{}
	var out []writeGroup
	for _, w := range writes {
		key := [4]string{w.Plane, w.what(), w.Verb, w.UserAgent}
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, writeGroup{Plane: w.Plane, What: w.what(), Verb: w.Verb, UserAgent: w.UserAgent,
				Codes: map[int]int{}, Planned: w.planned()})
		}
		out[i].Count++
		out[i].Codes[w.Code]++
	}
	slices.SortFunc(out, func(a, b writeGroup) int {
		return cmp.Or(cmp.Compare(planeOrder(a.Plane), planeOrder(b.Plane)), cmp.Compare(a.Plane, b.Plane),
			cmp.Compare(a.What, b.What), cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.UserAgent, b.UserAgent))
	})
	return out
}

// planeOrder puts the hub cluster first.
func planeOrder(plane string) int {
	if plane == hubPlane {
		return 0
	}
	return 1
}

// codes renders response codes and their counts: "200 x3, 409 x1".
func (g writeGroup) codes() string {
	keys := make([]int, 0, len(g.Codes))
	for c := range g.Codes {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, c := range keys {
		parts = append(parts, fmt.Sprintf("%d x%d", c, g.Codes[c]))
	}
	return strings.Join(parts, ", ")
}

// summary renders the groups on one line: "m01 configbundles/status update 3 (200 x3) by
// configbundle-hub, ...".
func summary(groups []writeGroup) string {
	if len(groups) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(groups))
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("%s %s %s %d (%s) by %s", g.Plane, g.What, g.Verb, g.Count, g.codes(), g.UserAgent))
	}
	return strings.Join(parts, ", ")
}

// unplannedWrite is a steady-state write the hub should not have made, with the write of the same
// object before it (by anyone), to tell what it follows.
type unplannedWrite struct {
	servedWrite
	Previous *servedWrite
}

// unplanned returns the writes of window that are not planned, each with the previous write of
// its object among all.
func unplanned(all, window []servedWrite) []unplannedWrite {
	var out []unplannedWrite
	for _, w := range window {
		if w.planned() {
			continue
		}
		u := unplannedWrite{servedWrite: w}
		for i := range all {
			if p := all[i]; p.sameObject(w) && p.At.Before(w.At) {
				u.Previous = &all[i]
			}
		}
		out = append(out, u)
	}
	return out
}

// describe renders the write, who made it, and the write of the same object before it, times
// relative to zero.
func (u unplannedWrite) describe(zero time.Time) string {
	s := fmt.Sprintf("%s by %q", u.servedWrite.describe(zero), u.UserAgent)
	p := u.Previous
	if p == nil {
		return s + "; no write of it before"
	}
	s += fmt.Sprintf("; its previous write %.3fs before (%+.3fs): %s %s -> %d", u.At.Sub(p.At).Seconds(), p.At.Sub(zero).Seconds(), p.Verb, p.what(), p.Code)
	if p.UserAgent != u.UserAgent {
		s += fmt.Sprintf(" by %q", p.UserAgent)
	}
	return s
}

// dumpWrites writes every write the control planes served, by anyone, one a line, to
// writes.log in the benchmark's directory (kept with BENCH_DEBUG), and returns its path.
func (f *fleet) dumpWrites() (string, error) {
	all, err := f.servedWrites()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, w := range all {
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", w.At.UTC().Format(time.RFC3339Nano), w.Plane, w.Verb, w.what(), w.object(), w.Code, w.UserAgent)
	}
	path := filepath.Join(f.Dir, "writes.log")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}
