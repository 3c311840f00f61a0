package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
)

// table asks the hub's API server for a resource as the table kubectl prints.
func table(g Gomega, path string) *metav1.Table {
	cs, err := kubernetes.NewForConfig(fl.HubPlane.Config)
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := cs.Discovery().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	t := &metav1.Table{}
	g.Expect(json.Unmarshal(raw, t)).To(Succeed())
	return t
}

// columns returns the names of a table's columns of the given priority (0: kubectl get, 1: the
// ones -o wide adds).
func columns(t *metav1.Table, priority int32) (names []string) {
	for _, c := range t.ColumnDefinitions {
		if c.Priority == priority {
			names = append(names, c.Name)
		}
	}
	return names
}

// columnNames returns the names of all a table's columns, in the order of its rows' cells.
func columnNames(t *metav1.Table) (names []string) {
	for _, c := range t.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}

func TestPrinterColumns(t *testing.T) {
	g := NewWithT(t)
	joined(t, "m1")
	g.Eventually(fl.Fleet).WithTimeout(timeout).WithPolling(interval).ShouldNot(BeNil())

	mcs := table(g, "/apis/hub.configbundle.dev/v1alpha1/memberclusters")
	g.Expect(columns(mcs, 0)).To(Equal([]string{"Name", "Ready", "Reason", "Synced", "Version", "Bundles", "Bundles-Ready", "Failed", "Heals", "Paused", "Age"}))
	g.Expect(columns(mcs, 1)).To(Equal([]string{"Drifted", "Placed", "Last-Seen", "Credentials", "Credentials-Expiry", "Replica"}))
	var m1 []any
	for _, row := range mcs.Rows {
		if row.Cells[0] == "m1" {
			m1 = row.Cells
		}
	}
	g.Expect(m1).NotTo(BeNil())
	g.Expect(m1[1:4]).To(Equal([]any{"True", "Connected", "True"}), "READY, REASON, SYNCED")
	g.Expect(m1[slices.Index(columnNames(mcs), "Version")]).To(HavePrefix("v1.36"))
	g.Expect(m1[slices.Index(columnNames(mcs), "Paused")]).To(BeFalse(), "PAUSED: spec.paused, false by default")
	// The credential hub register made expires in a year: -o wide says when (a date column shows
	// the age of a past time, and "<invalid>" for a future one).
	expiry := fl.MemberCluster("m1")(g).Status.CredentialsExpiry
	g.Expect(expiry).NotTo(BeNil())
	g.Expect(expiry.Time).To(BeTemporally(">", time.Now()))
	g.Expect(m1[slices.Index(columnNames(mcs), "Credentials-Expiry")]).To(Equal(expiry.UTC().Format(time.RFC3339)))

	fleets := table(g, "/apis/hub.configbundle.dev/v1alpha1/fleets")
	g.Expect(columns(fleets, 0)).To(Equal([]string{"Name", "Ready", "Reason", "Clusters", "Clusters-Ready", "Bundles", "Bundles-Ready", "Failed", "Heals", "Age"}))
	g.Expect(columns(fleets, 1)).To(Equal([]string{"Paused", "Unowned", "Drifted", "FleetBundles", "FleetBundles-Failed", "Heartbeat"}))
	g.Expect(fleets.Rows).To(HaveLen(1))
	g.Expect(fleets.Rows[0].Cells[0]).To(Equal("default"))

	// And as kubectl prints them, where kubectl is installed.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not installed: checked the API server's tables only")
		return
	}
	for resource, header := range map[string]string{
		"memberclusters": "NAME   READY   REASON      SYNCED   VERSION",
		"fleet":          "NAME      READY",
	} {
		out, err := exec.Command(kubectl, "--kubeconfig", fl.HubPlane.KubeconfigPath, "get", resource).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		t.Logf("kubectl get %s:\n%s", resource, out)
		g.Expect(strings.Fields(string(out))[:2]).To(Equal(strings.Fields(header)[:2]))
	}
	out, err := exec.Command(kubectl, "--kubeconfig", fl.HubPlane.KubeconfigPath, "get", "mc", "m1", "-o", "wide").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	t.Logf("kubectl get mc m1 -o wide:\n%s", out)
	g.Expect(string(out)).To(ContainSubstring(expiry.UTC().Format(time.RFC3339)))
	g.Expect(string(out)).NotTo(ContainSubstring("<invalid>"))
}

// auditedMembers are members whose API servers log every write, started once, by the first test
// that joins them, and joined by each test that uses them for that test alone.
type auditedMembers struct {
	kind  string // what they are for, in logs
	names []string
	// opts are the members' control-plane options (AuditWrites is set in any case).
	opts controlplane.Options
	// started, if set, prepares the members once they are up.
	started func([]*fleet.Member) error
	once    sync.Once
	err     error
}

// join starts the members (once), joins those named and makes them leave when the test ends
// (after the test's other cleanups: its FleetBundles are gone by then).
func (a *auditedMembers) join(t *testing.T, names ...string) {
	t.Helper()
	a.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		start := time.Now()
		opts := a.opts
		opts.AuditWrites = true
		var members []*fleet.Member
		members, a.err = fl.AddMembers(ctx, controlplane.Named(opts, a.names...)...)
		if a.err == nil && a.started != nil {
			a.err = a.started(members)
		}
		t.Logf("started the %s members %v: %v", a.kind, a.names, time.Since(start).Round(time.Millisecond))
	})
	if a.err != nil {
		t.Fatalf("starting the %s members: %v", a.kind, a.err)
	}
	g, ctx := NewWithT(t), context.Background()
	for _, name := range names {
		s := &corev1.Secret{}
		switch err := fl.Hub.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: name}, s); {
		case apierrors.IsNotFound(err):
			fl.MustRegister(t, name)
		case err != nil:
			t.Fatal(err)
		case s.Labels[hubv1alpha1.DefaultSecretLabel] != "true":
			secretLabel(g, name, true)
		}
	}
	t.Cleanup(func() {
		for _, name := range names {
			secretLabel(g, name, false)
		}
		for _, name := range names {
			g.Eventually(memberClusterGone(name)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue(), "%s left", name)
		}
	})
	for _, name := range names {
		g.Eventually(fl.MemberCluster(name)).WithTimeout(joinTimeout).WithPolling(interval).Should(fleet.ReadyIs(metav1.ConditionTrue, hubv1alpha1.ConnectedReason), name)
	}
}
