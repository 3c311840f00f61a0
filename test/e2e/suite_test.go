package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/hubprocess"
	"configbundle.dev/hub/pkg/hubmanager"
)

// Timeouts of the suite, generous for a loaded two-core machine.
const (
	startTimeout  = 3 * time.Minute
	joinTimeout   = time.Minute // connect, install the CRD, warm the caches
	timeout       = 20 * time.Second
	interval      = 100 * time.Millisecond
	quietPeriod   = 3 * time.Second
	probeInterval = time.Second
	// heartbeatInterval is the hub's --heartbeat-interval in the suite.
	heartbeatInterval = time.Second
	secretNS          = hubv1alpha1.DefaultSecretNamespace
)

// The fleet: a hub and five members. m1 to m3 are registered with the registration command;
// m4 serves no ConfigBundle CRD and gets a credential that may not install it; quietMember
// (and the hub) log every write they serve, for TestSteadyStateIsSilent.
var (
	hubCP   *controlplane.ControlPlane
	members = map[string]*controlplane.ControlPlane{}
	hubc    client.Client
	memberc = map[string]client.Client{}
	hub     *hubProcess
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds the control-plane binaries")
		return 1
	}
	dir, err := os.MkdirTemp("", "configbundle-e2e-")
	must(err)
	defer func() {
		if os.Getenv("E2E_KEEP") == "" {
			os.RemoveAll(dir)
		}
	}()
	bin, err := hubprocess.Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	hubCRDs, err := config.HubCRDs()
	must(err)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cps, err := controlplane.Start(ctx, append(
		controlplane.Named(controlplane.Options{CRDs: hubCRDs, AuditWrites: true}, "hub"),
		append(controlplane.Named(controlplane.Options{}, "m1", "m2", "m3", "m4"),
			controlplane.Named(controlplane.Options{AuditWrites: true}, quietMember)...)...)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting control planes:", err)
		return 1
	}
	defer func() { _ = controlplane.StopAll(cps) }()
	hubs, mems := cps[:1], cps[1:]
	scheme, err := hubmanager.Scheme()
	must(err)
	hubCP = hubs[0]
	hubc, err = client.New(hubCP.Config, client.Options{Scheme: scheme})
	must(err)
	must(hubc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNS}}))
	for _, cp := range mems {
		members[cp.Name] = cp
		memberc[cp.Name], err = client.New(cp.Config, client.Options{Scheme: scheme})
		must(err)
	}

	hub = &hubProcess{bin: bin, kubeconfig: hubCP.KubeconfigPath, logPath: filepath.Join(dir, "hub.log")}
	must(hub.start())
	defer hub.stop(syscall.SIGTERM)
	code := m.Run()
	if code != 0 {
		hub.dumpLog(os.Stderr)
	}
	return code
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// hubProcess is the hub binary under test, started and stopped by the tests.
type hubProcess struct {
	bin, kubeconfig, logPath string
	proc                     *hubprocess.Process
}

func (h *hubProcess) start() error {
	var err error
	h.proc, err = hubprocess.Start(context.Background(), hubprocess.Options{Binary: h.bin, Kubeconfig: h.kubeconfig, LogPath: h.logPath,
		Args: []string{"--probe-interval=" + probeInterval.String(), "--heartbeat-interval=" + heartbeatInterval.String()}, ReadyTimeout: timeout})
	return err
}

// stop ends the hub with sig (SIGKILL: as a crash would).
func (h *hubProcess) stop(sig syscall.Signal) {
	h.proc.Stop(sig)
	h.proc = nil
}

func (h *hubProcess) dumpLog(w *os.File) {
	if h.proc != nil {
		fmt.Fprintf(w, "---- hub log (tail of %s) ----\n%s\n", h.logPath, h.proc.LogTail(20000))
	}
}

// register registers (or re-registers) a member with the hub binary's register command, as a
// user would.
func register(t *testing.T, name string) {
	t.Helper()
	out, err := exec.Command(hub.bin, "register", name,
		"--member-kubeconfig", members[name].KubeconfigPath,
		"--hub-kubeconfig", hubCP.KubeconfigPath,
		"--timeout", timeout.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("hub register %s: %v\n%s", name, err, out)
	}
	t.Logf("%s", out)
}

// kubeconfigFor renders a self-contained kubeconfig for a client config.
func kubeconfigFor(cfg *rest.Config) []byte {
	data, err := controlplane.KubeconfigFor("c", cfg)
	must(err)
	return data
}

// putSecret creates or replaces a labelled member Secret on the hub.
func putSecret(g Gomega, name string, data map[string][]byte) {
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: secretNS}}
	err := hubc.Get(ctx, client.ObjectKeyFromObject(s), s)
	if err != nil && !apierrors.IsNotFound(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	s.Labels = map[string]string{hubv1alpha1.DefaultSecretLabel: "true"}
	s.Data = data
	if apierrors.IsNotFound(err) {
		g.Expect(hubc.Create(ctx, s)).To(Succeed())
		return
	}
	g.Expect(hubc.Update(ctx, s)).To(Succeed())
}

func deleteSecret(g Gomega, name string) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: secretNS}}
	g.Expect(client.IgnoreNotFound(hubc.Delete(context.Background(), s))).To(Succeed())
}

// memberCluster reads a MemberCluster.
func memberCluster(name string) func(Gomega) *hubv1alpha1.MemberCluster {
	return func(g Gomega) *hubv1alpha1.MemberCluster {
		mc := &hubv1alpha1.MemberCluster{}
		g.Expect(hubc.Get(context.Background(), client.ObjectKey{Name: name}, mc)).To(Succeed())
		return mc
	}
}

// readyIs matches an object whose Ready condition has the status and reason.
func readyIs(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return WithTransform(func(obj any) string {
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *hubv1alpha1.MemberCluster:
			conds = o.Status.Conditions
		case *hubv1alpha1.Fleet:
			conds = o.Status.Conditions
		}
		c := meta.FindStatusCondition(conds, hubv1alpha1.ReadyCondition)
		if c == nil {
			return "no Ready condition"
		}
		return string(c.Status) + "/" + c.Reason
	}, Equal(string(status)+"/"+reason))
}

func fleet(g Gomega) *hubv1alpha1.Fleet {
	f := &hubv1alpha1.Fleet{}
	g.Expect(hubc.Get(context.Background(), client.ObjectKey{Name: hubv1alpha1.FleetName}, f)).To(Succeed())
	return f
}

// sample returns the value of one series of a scrape (name and labels as the exposition format
// writes them), or -1 if the scrape has none.
func sample(scrape, series string) float64 {
	for line := range strings.Lines(scrape) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// scrape reads the hub's Prometheus metrics.
func scrape(g Gomega) string {
	resp, err := http.Get("http://" + hub.proc.MetricsAddr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return string(body)
}
