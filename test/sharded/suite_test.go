package sharded

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/pkg/sharding/sharder"
)

// Settings of the suite: short Leases and probes, so that a failover takes seconds.
const (
	leaseDuration = 6 * time.Second
	probeInterval = 3 * time.Second
	// takeoverBound is what the contract allows between a replica's death and a drift in one of
	// its members healed: one lease duration and one probe interval.
	takeoverBound = leaseDuration + probeInterval

	memberCount  = 12
	secretNS     = hubv1alpha1.DefaultSecretNamespace
	bundleNS     = "default"
	bundleName   = "app"
	startTimeout = 4 * time.Minute
	timeout      = 60 * time.Second
	interval     = 100 * time.Millisecond
)

// fl is the fleet: a hub control plane, twelve members m01..m12, and the replicas r0, r1, r2
// running at the start of every test (a test that stops or adds one restores them).
var (
	fl    *fleet.Fleet
	names []string // the members' names, sorted
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if err := controlplane.CheckAssets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for i := 1; i <= memberCount; i++ {
		names = append(names, fmt.Sprintf("m%02d", i))
	}
	var err error
	fl, err = fleet.Start(ctx, fleet.Options{
		// Slim members on one etcd; they log every write, by user agent: which replica wrote, and when.
		Shared: &controlplane.SharedOptions{AuditWrites: true},
		// HUB_BUILD_FLAGS="-race" runs the replicas with the race detector (they share state
		// between the coordinator's tick, the Lease renewals and every write's fence check); it
		// needs a quiet machine: a loaded one lets Leases of 6s lapse.
		BuildFlags: strings.Fields(os.Getenv("HUB_BUILD_FLAGS")),
		HubArgs: []string{"--lease-duration=" + leaseDuration.String(), "--probe-interval=" + probeInterval.String(),
			"--zap-time-encoding=rfc3339nano"},
		Timeout: timeout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = fl.Close() }()
	if _, err := fl.AddSlimMembers(ctx, names...); err != nil {
		fmt.Fprintln(os.Stderr, "starting the members:", err)
		return 1
	}
	if err := setUp(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the fleet:", err)
		return 1
	}
	code := m.Run()
	for _, id := range []string{"r0", "r1", "r2", "r3"} {
		if data, _ := os.ReadFile(fl.LogPath(id)); strings.Contains(string(data), "WARNING: DATA RACE") {
			fmt.Fprintf(os.Stderr, "replica %s reported a data race:\n%s\n", id, data)
			code = 1
		}
	}
	if code != 0 {
		for _, id := range []string{"r0", "r1", "r2", "r3"} {
			if data, err := os.ReadFile(fl.LogPath(id)); err == nil {
				fmt.Fprintf(os.Stderr, "---- replica %s: who ran what, and errors ----\n%s\n", id, ownershipLines(data))
			}
		}
	}
	return code
}

// setUp registers every member, starts r0..r2 and creates one ConfigBundle in every member.
func setUp(ctx context.Context) error {
	for _, m := range fl.Members() {
		if err := fl.PutKubeconfig(ctx, m.Name, m.Plane.Kubeconfig()); err != nil {
			return err
		}
	}
	for _, id := range []string{"r0", "r1", "r2"} {
		if err := startReplica(id); err != nil {
			return err
		}
	}
	for _, name := range names {
		// The hub installs the CRD when the member joins: create the bundle once it can.
		bundle := fleet.NewBundle(bundleNS, bundleName, desired(name))
		if err := retryUntil(ctx, func() error { return fl.Member(name).Client.Create(ctx, bundle) }); err != nil {
			return fmt.Errorf("creating the bundle in %s: %w", name, err)
		}
	}
	return nil
}

func retryUntil(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ownershipLines keeps the lines of a replica's log that say which members it ran and why it
// stopped, and its errors, at most the last 300.
func ownershipLines(data []byte) string {
	keep := []string{"Live replicas changed", "synchronization start", "synchronization stop", "lease lost",
		"Member joined", "Member handed over", "Member left", "The hub stopped", `"level":"error"`, "leaderelection"}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		for _, k := range keep {
			if strings.Contains(line, k) {
				if len(line) > 300 {
					line = line[:300]
				}
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out[max(0, len(out)-300):], "\n")
}

// desired is the message of a member's bundle, and so the data its ConfigMap must hold.
func desired(member string) string { return "hello from the hub to " + member }

// startReplica starts the hub binary as replica id, with --sharded.
func startReplica(id string) error {
	_, err := fl.StartReplica(context.Background(), id)
	return err
}

// signalReplica sends sig (SIGSTOP, SIGCONT) to replica id, which keeps running.
func signalReplica(t *testing.T, id string, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(fl.HubProcess(id).Pid(), sig); err != nil {
		t.Fatalf("signalling replica %s: %v", id, err)
	}
}

// owners returns the replica managing each member, once the fleet is settled on the replicas
// alive: every member Ready, its Lease held by the replica rendezvous hashing names among the
// alive ones (a member's Lease is valid while its holder's peer Lease is), and its MemberCluster's status.replica naming the same replica.
func owners(g Gomega, alive ...string) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	var peers []sharder.PeerInfo
	for _, id := range alive {
		peers = append(peers, sharder.PeerInfo{ID: id, Weight: 1})
	}
	hrw := sharder.NewHRW()
	for _, name := range names {
		mc := &hubv1alpha1.MemberCluster{}
		g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Name: name}, mc)).To(Succeed())
		ready := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition)
		g.Expect(ready).NotTo(BeNil(), "member %s has no Ready condition", name)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "member %s: %s", name, ready.Message)
		lease := &coordinationv1.Lease{}
		g.Expect(fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: hubv1alpha1.MemberLeasePrefix + "-" + name}, lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		holder := *lease.Spec.HolderIdentity
		g.Expect(alive).To(ContainElement(holder), "member %s's Lease holder", name)
		g.Expect(hrw.ShouldOwn(name, peers, sharder.PeerInfo{ID: holder, Weight: 1})).To(BeTrue(),
			"member %s is held by %s, not by its rendezvous owner among %v", name, holder, alive)
		g.Expect(mc.Status.Replica).To(Equal(holder), "member %s: status.replica and the Lease holder", name)
		out[name] = holder
	}
	return out
}

// settledOwners waits until the fleet is settled on the replicas alive and returns the owners.
func settledOwners(t *testing.T, alive ...string) map[string]string {
	t.Helper()
	var out map[string]string
	Eventually(func(g Gomega) { out = owners(g, alive...) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	return out
}

// membersOf returns the members a replica manages, sorted.
func membersOf(owners map[string]string, id string) []string {
	var out []string
	for m, o := range owners {
		if o == id {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// configMap reads the ConfigMap of a member's bundle.
func configMap(g Gomega, member string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	g.Expect(fl.Member(member).Client.Get(context.Background(), client.ObjectKey{Namespace: bundleNS, Name: bundleName}, cm)).To(Succeed())
	return cm
}

// drift changes the data of a member's ConfigMap behind the hub's back.
func drift(member, value string) error {
	return fleet.Tamper(context.Background(), fl.Member(member).Client, client.ObjectKey{Namespace: bundleNS, Name: bundleName}, value)
}

// expectHealed waits until every member's ConfigMap holds its bundle's message.
func expectHealed(t *testing.T, members ...string) {
	t.Helper()
	for _, m := range members {
		Eventually(func(g Gomega) string {
			return configMap(g, m).Data[configbundlev1alpha1.MessageKey]
		}).WithTimeout(timeout).WithPolling(interval).Should(Equal(desired(m)), "member %s", m)
	}
}

// drifter drifts the ConfigMaps of members in turn, one every period, until stopped.
type drifter struct {
	stop chan struct{}
	done chan struct{}
	n    int
}

func startDrifting(members []string, period time.Duration) *drifter {
	d := &drifter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			for _, m := range members {
				select {
				case <-d.stop:
					return
				case <-t.C:
				}
				if drift(m, fmt.Sprintf("drift %d", d.n)) == nil {
					d.n++
				}
			}
		}
	}()
	return d
}

// Stop stops drifting and returns the number of drifts made.
func (d *drifter) Stop() int {
	close(d.stop)
	<-d.done
	return d.n
}

// heal is one "Healed drift" line of a replica's log.
type heal struct {
	replica, member string
	at              time.Time
}

// healsIn returns the heals the replicas logged between from and to, sorted by time.
func healsIn(t *testing.T, from, to time.Time, ids ...string) []heal {
	t.Helper()
	var out []heal
	for _, id := range ids {
		f, err := os.Open(fl.LogPath(id))
		if err != nil {
			t.Fatalf("reading the log of replica %s: %v", id, err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var line struct {
				Msg     string    `json:"msg"`
				TS      time.Time `json:"ts"`
				Cluster string    `json:"cluster"`
			}
			if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "Healed drift" {
				continue
			}
			if !line.TS.Before(from) && !line.TS.After(to) {
				out = append(out, heal{replica: id, member: line.Cluster, at: line.TS})
			}
		}
		f.Close()
	}
	slices.SortFunc(out, func(a, b heal) int { return a.at.Compare(b.at) })
	return out
}

// countLines counts the lines of a replica's log that contain s.
func countLines(t *testing.T, id, s string) int {
	t.Helper()
	data, err := os.ReadFile(fl.LogPath(id))
	if err != nil {
		t.Fatalf("reading the log of replica %s: %v", id, err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// timeline returns the lines of a replica's log about a member's takeover, from a time on: the
// live replicas changing, the member joining, its Lease taken, its drift healed.
func timeline(t *testing.T, id, member string, from time.Time) []string {
	t.Helper()
	data, err := os.ReadFile(fl.LogPath(id))
	if err != nil {
		t.Fatalf("reading the log of replica %s: %v", id, err)
	}
	var out []string
	for _, raw := range strings.Split(string(data), "\n") {
		var line struct {
			Msg     string    `json:"msg"`
			TS      time.Time `json:"ts"`
			Cluster string    `json:"cluster"`
		}
		if json.Unmarshal([]byte(raw), &line) != nil || line.TS.Before(from) {
			continue
		}
		switch {
		case line.Msg == "Live replicas changed",
			line.Cluster == member && slices.Contains([]string{"Member joined", "synchronization start", "Healed drift"}, line.Msg):
			out = append(out, fmt.Sprintf("+%s %s", line.TS.Sub(from).Round(time.Millisecond), line.Msg))
		}
	}
	return out
}

// replicaWrites returns the writes replica id made to a member, from the member's audit log:
// each replica's user agent names it, configbundle-hub/<version> (<replica-id>).
func replicaWrites(t *testing.T, member, id string) []controlplane.Write {
	t.Helper()
	var out []controlplane.Write
	for _, w := range hubWrites(t, member) {
		if replicaOf(w) == id {
			out = append(out, w)
		}
	}
	return out
}

// hubWrites returns the writes the hub's replicas made to a member, in the order they were
// answered, from the member's audit log: those the member carried out (a 2xx answer; a refused
// request, such as the create-only CRD apply of a joining replica, which fails with a conflict
// where the CRD exists, changes nothing).
func hubWrites(t *testing.T, member string) []controlplane.Write {
	t.Helper()
	all, err := fl.Member(member).Plane.Writes()
	if err != nil {
		t.Fatalf("member %s: %v", member, err)
	}
	var out []controlplane.Write
	for _, w := range all {
		if replicaOf(w) != "" && w.Code >= 200 && w.Code < 300 {
			out = append(out, w)
		}
	}
	return out
}

// replicaOf returns the replica id a write's user agent names, or "" if no hub replica made it.
func replicaOf(w controlplane.Write) string {
	rest, ok := strings.CutPrefix(w.UserAgent, hubv1alpha1.UserAgentPrefix)
	if !ok {
		return ""
	}
	_, id, ok := strings.Cut(rest, " (")
	if !ok {
		return ""
	}
	return strings.TrimSuffix(id, ")")
}

// expectOneWriterAtATime checks, from the members' audit logs, that the hub's writers of each
// member follow one another: each replica's first write after another's was received only
// after the other's last write was answered. It returns how many times members changed hands.
func expectOneWriterAtATime(t *testing.T, members ...string) int {
	t.Helper()
	handovers := 0
	for _, m := range members {
		ws := hubWrites(t, m)
		slices.SortFunc(ws, func(a, b controlplane.Write) int { return a.Received.Compare(b.Received) })
		var last controlplane.Write // the last write of the current writer, by answer
		for i, w := range ws {
			if i == 0 || replicaOf(w) == replicaOf(last) {
				if i == 0 || w.At.After(last.At) {
					last = w
				}
				continue
			}
			handovers++
			if w.Received.Before(last.At) {
				t.Errorf("member %s: %s's write %s %s/%s was received at %s, before %s's write %s %s/%s was answered at %s",
					m, replicaOf(w), w.Verb, w.Resource, w.Name, w.Received.Format(time.StampMicro),
					replicaOf(last), last.Verb, last.Resource, last.Name, last.At.Format(time.StampMicro))
			}
			last = w
		}
	}
	return handovers
}
