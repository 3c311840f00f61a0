//go:build cluster

package incluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	"configbundle.dev/hub/internal/testing/cluster"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/fleet"
	"configbundle.dev/hub/internal/testing/hubprocess"
)

const (
	// imageTag is the tag the test builds the hub's image under; IfNotPresent finds it imported.
	imageTag  = "incluster-test"
	image     = "ghcr.io/configbundle/hub:" + imageTag
	namespace = "configbundle-system"
	// deployment, serviceAccount and leaseName are config/default's names.
	deployment     = "configbundle-hub"
	serviceAccount = "configbundle-hub"
	leaseName      = "configbundle-hub"
	metricsService = "configbundle-hub-metrics"

	timeout  = 3 * time.Minute
	interval = 250 * time.Millisecond
)

// hubUser is the user the hub's pods authenticate as.
var hubUser = "system:serviceaccount:" + namespace + ":" + serviceAccount

// fixture is the deployed hub, its cluster and its members.
type fixture struct {
	cluster *cluster.Cluster
	cs      *kubernetes.Clientset
	// fl is the fleet of the cluster (its hub) and the members.
	fl     *fleet.Fleet
	hubBin string
	dir    string
	// logs are the hub pods' logs, read before each pod is deleted and at the end.
	logs map[string]string
}

func TestHubInCluster(t *testing.T) {
	began := time.Now()
	f := setUp(t)
	g := NewWithT(t)
	ctx := t.Context()

	step := time.Now()
	f.deploy(t)
	t.Logf("config/default applied; Deployment Available in %s", time.Since(step).Round(time.Millisecond))

	step = time.Now()
	for _, m := range f.fl.Members() {
		f.fl.MustRegister(t, m.Name)
	}
	for _, m := range f.fl.Members() {
		g.Eventually(f.memberReady(m.Name)).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
	}
	t.Logf("members registered with `hub register` and Ready in %s", time.Since(step).Round(time.Millisecond))

	bundle := f.createBundle(g, "m1", "incluster", "greeting", "hello")
	f.tamper(g, "m1", bundle)
	g.Eventually(f.fl.Member("m1").Message(bundle)).WithTimeout(timeout).WithPolling(interval).Should(Equal("hello"), "drift healed")

	f.kubectlReports(g)
	f.metricsAnswer(g)

	// Leader election: the leader's pod deleted, the standby takes the Lease and heals.
	leader := f.leader(g)
	f.keepLogs(ctx, g)
	step = time.Now()
	g.Expect(f.cs.CoreV1().Pods(namespace).Delete(ctx, leader, metav1.DeleteOptions{})).To(Succeed())
	// The leader releases the Lease as it stops: wait for another pod to hold it.
	g.Eventually(f.leader).WithTimeout(timeout).WithPolling(interval).Should(And(Not(BeEmpty()), Not(Equal(leader))))
	t.Logf("leader pod %s deleted; %s leads after %s", leader, f.leader(g), time.Since(step).Round(time.Millisecond))
	f.tamper(g, "m1", bundle)
	g.Eventually(f.fl.Member("m1").Message(bundle)).WithTimeout(timeout).WithPolling(interval).Should(Equal("hello"), "drift healed by the new leader")
	g.Eventually(f.available).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())

	f.ranAsItsServiceAccount(ctx, g)
	t.Logf("in-cluster test done in %s (cluster and members included)", time.Since(began).Round(time.Second))
}

// setUp builds the hub's image and binary, starts the cluster with the image imported and
// two members the pods reach at the cluster's host address.
func setUp(t *testing.T) *fixture {
	g := NewWithT(t)
	dir := t.TempDir()
	f := &fixture{dir: dir, logs: map[string]string{}}

	ctrllog.SetLogger(logr.Discard()) // envtest's and the clients' logs are not the subject here
	step := time.Now()
	tar := filepath.Join(dir, "hub-image.tar")
	out, err := exec.Command("go", "run", "../../hack/image", "--image", image, "--output", tar).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "building the image: %s", out)
	f.hubBin, err = hubprocess.Build(dir)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("image and hub binary built in %s: %s", time.Since(step).Round(time.Millisecond), strings.TrimSpace(string(out)))

	step = time.Now()
	c, err := cluster.Start(t.Context(), cluster.Options{Images: []string{tar}})
	g.Expect(err).NotTo(HaveOccurred())
	f.cluster = c
	t.Cleanup(func() {
		defer func() {
			if err := c.Stop(); err != nil {
				t.Errorf("stopping the cluster: %v", err)
			}
		}()
		if t.Failed() {
			f.dumpLogs(t)
		}
	})
	t.Logf("single-node cluster up in %s", time.Since(step).Round(time.Millisecond))

	f.cs, err = kubernetes.NewForConfig(c.Config)
	g.Expect(err).NotTo(HaveOccurred())
	f.fl = fleet.MustStart(t, fleet.Options{
		HubConfig: c.Config, HubKubeconfig: c.KubeconfigPath, SecretNamespace: namespace, HubBinary: f.hubBin, Dir: dir, Timeout: timeout,
		Members: controlplane.Named(controlplane.Options{ListenAddress: cluster.HostIP}, "m1", "m2"),
	})
	return f
}

// deploy applies config/default through an overlay that only sets the image, and waits for
// the Deployment to be Available with every replica ready (the readiness probe passes).
func (f *fixture) deploy(t *testing.T) {
	g := NewWithT(t)
	base, err := filepath.Abs("../../config/default")
	g.Expect(err).NotTo(HaveOccurred())
	overlay := filepath.Join(f.dir, "overlay")
	g.Expect(os.Mkdir(overlay, 0o700)).To(Succeed())
	base, err = filepath.Rel(overlay, base) // kustomize takes no absolute path for a base
	g.Expect(err).NotTo(HaveOccurred())
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: ghcr.io/configbundle/hub
  newTag: %s
`, base, imageTag)
	g.Expect(os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600)).To(Succeed())
	t.Logf("%s", f.kubectl(g, "apply", "--server-side", "-k", overlay))
	g.Eventually(f.available).WithTimeout(timeout).WithPolling(interval).Should(BeTrue())
}

// available reports whether the Deployment is Available with all its replicas ready and
// up to date.
func (f *fixture) available(g Gomega) bool {
	d, err := f.cs.AppsV1().Deployments(namespace).Get(context.Background(), deployment, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			return d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas
		}
	}
	return false
}

// kubectl runs the cluster's kubectl as its admin and returns its output.
func (f *fixture) kubectl(g Gomega, args ...string) string {
	cmd := exec.Command(f.cluster.Kubectl, append([]string{"--kubeconfig", f.cluster.KubeconfigPath}, args...)...)
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl %v: %s", args, out)
	return string(out)
}

// memberReady reports whether a MemberCluster is Ready.
func (f *fixture) memberReady(name string) func(Gomega) bool {
	return func(g Gomega) bool {
		status, _ := fleet.ReadyReason(f.fl.MemberCluster(name)(g).Status.Conditions)
		return status == metav1.ConditionTrue
	}
}

// createBundle creates a ConfigBundle in a member and waits for its ConfigMap.
func (f *fixture) createBundle(g Gomega, member, ns, name, message string) *configbundlev1alpha1.ConfigBundle {
	c := f.fl.Member(member).Client
	g.Expect(c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	b := fleet.NewBundle(ns, name, message)
	// The CRD is installed by the hub when the member joins: wait for it to be served.
	g.Eventually(func() error { return c.Create(context.Background(), b) }).WithTimeout(timeout).WithPolling(interval).Should(Succeed())
	g.Eventually(f.fl.Member(member).Message(b)).WithTimeout(timeout).WithPolling(interval).Should(Equal(message))
	return b
}

// tamper changes a managed ConfigMap's message.
func (f *fixture) tamper(g Gomega, member string, b *configbundlev1alpha1.ConfigBundle) {
	g.Expect(fleet.Tamper(context.Background(), f.fl.Member(member).Client, client.ObjectKeyFromObject(b), "tampered")).To(Succeed())
}

// kubectlReports: `kubectl get mc` and `kubectl get fleet` show what an operator scans.
func (f *fixture) kubectlReports(g Gomega) {
	g.Eventually(func(g Gomega) {
		mcs := f.kubectl(g, "get", "mc")
		g.Expect(mcs).To(MatchRegexp(`(?m)^m1\s+True\s+Connected`))
		g.Expect(mcs).To(MatchRegexp(`(?m)^m2\s+True\s+Connected`))
		g.Expect(f.kubectl(g, "get", "fleet")).To(MatchRegexp(`(?m)^default\s+True\s+AllReady\s+2\s+2\s+1\s+1\s+0\s+1\s`))
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
}

// metricsAnswer: the metrics Service answers at its ClusterIP (through kube-proxy) over HTTPS
// to a ServiceAccount bound to configbundle-hub-metrics-reader, refuses a request without a
// token (401) and one of a ServiceAccount without the binding (403); the leader's endpoint
// counts the heal.
func (f *fixture) metricsAnswer(g Gomega) {
	ctx := context.Background()
	reader, stranger := f.token(g, "metrics-scraper", "configbundle-hub-metrics-reader"), f.token(g, "stranger", "")
	svc, err := f.cs.CoreV1().Services(namespace).Get(ctx, metricsService, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	g.Eventually(func(g Gomega) string {
		code, body := get(g, url, reader)
		g.Expect(code).To(Equal(http.StatusOK), body)
		return body
	}).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring("configbundle_build_info"))
	code, _ := get(g, url, "")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "a scrape without a token")
	code, _ = get(g, url, stranger)
	g.Expect(code).To(Equal(http.StatusForbidden), "a scrape by a ServiceAccount without get on /metrics")

	pod, err := f.cs.CoreV1().Pods(namespace).Get(ctx, f.leader(g), metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	port := svc.Spec.Ports[0].TargetPort.IntValue()
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == svc.Spec.Ports[0].TargetPort.String() {
			port = int(p.ContainerPort)
		}
	}
	g.Eventually(func(g Gomega) string {
		_, body := get(g, fmt.Sprintf("https://%s:%d/metrics", pod.Status.PodIP, port), reader)
		return body
	}).WithTimeout(timeout).WithPolling(interval).Should(ContainSubstring(`configbundle_heals_total{cluster="m1"} 1`))
}

// token creates a ServiceAccount in the default namespace, bound to clusterRole unless it is
// empty, and returns a token of it.
func (f *fixture) token(g Gomega, name, clusterRole string) string {
	ctx := context.Background()
	_, err := f.cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	if clusterRole != "" {
		_, err = f.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceDefault, Name: name}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	tr, err := f.cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// get GETs url with a bearer token (none if empty) and returns the status code and body. The
// hub's certificate is self-signed (no --metrics-cert-dir): not verified.
func get(g Gomega, url, token string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil) //nolint:noctx // bounded by the client's timeout
	g.Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the hub's self-signed serving certificate
	}}
	resp, err := client.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

// leader returns the name of the pod holding the leader-election Lease, empty if none does.
func (f *fixture) leader(g Gomega) string {
	lease := &coordinationv1.Lease{}
	g.Expect(f.fl.Hub.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: leaseName}, lease)).To(Succeed())
	pod, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	return pod
}

// keepLogs reads every hub pod's log.
func (f *fixture) keepLogs(ctx context.Context, g Gomega) {
	g.Expect(f.readLogs(ctx)).To(Succeed())
}

func (f *fixture) readLogs(ctx context.Context) error {
	pods, err := f.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=configbundle-hub"})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		log, err := f.cs.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
		f.logs[p.Name] = string(log)
	}
	return nil
}

// forbidden matches an authorization failure as client-go and controller-runtime log it.
var forbidden = regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|create|update|patch|delete) resource`)

// ranAsItsServiceAccount: the pods run as the ServiceAccount of config/default, never
// restarted (the liveness probe passes), their requests reached the API server as that
// ServiceAccount and none was refused, and no log line of theirs says forbidden.
func (f *fixture) ranAsItsServiceAccount(ctx context.Context, g Gomega) {
	pods, err := f.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=configbundle-hub"})
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range pods.Items {
		g.Expect(p.Spec.ServiceAccountName).To(Equal(serviceAccount))
		for _, s := range p.Status.ContainerStatuses {
			g.Expect(s.RestartCount).To(BeZero(), "pod %s restarted", p.Name)
		}
	}
	f.keepLogs(ctx, g)
	for pod, log := range f.logs {
		for line := range strings.Lines(log) {
			g.Expect(forbidden.MatchString(line)).To(BeFalse(), "pod %s: %s", pod, line)
		}
	}
	f.logsAreJSON(g)
	requests, refused := f.audit(g)
	g.Expect(requests).To(BeNumerically(">", 0), "the hub's requests are made as %s", hubUser)
	g.Expect(refused).To(BeEmpty(), "requests of %s refused", hubUser)
}

// logsAreJSON: every line of every hub pod's log is a JSON object with a level and a message,
// leader election's (client-go's, through klog) included.
func (f *fixture) logsAreJSON(g Gomega) {
	election := 0
	for pod, log := range f.logs {
		for line := range strings.Lines(log) {
			var entry struct{ Level, Msg string }
			g.Expect(json.Unmarshal([]byte(line), &entry)).To(Succeed(), "pod %s logged a line that is not JSON: %s", pod, line)
			g.Expect(entry.Level).NotTo(BeEmpty(), "pod %s: %s", pod, line)
			g.Expect(entry.Msg).NotTo(BeEmpty(), "pod %s: %s", pod, line)
			if strings.Contains(entry.Msg, "lease") {
				election++
			}
		}
	}
	g.Expect(election).To(BeNumerically(">", 0), "leader election's lines (klog) are in the logs, as JSON")
}

// audit reads the API server's audit log: how many requests the hub's ServiceAccount made,
// and those refused (403).
func (f *fixture) audit(g Gomega) (requests int, refused []string) {
	file, err := os.Open(filepath.Join(f.cluster.Dir(), "logs", "audit.log"))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = file.Close() }()
	s := bufio.NewScanner(file)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var e struct {
			Verb, RequestURI string
			User             struct{ Username string }
			ResponseStatus   struct{ Code int }
		}
		g.Expect(json.Unmarshal(s.Bytes(), &e)).To(Succeed())
		if e.User.Username != hubUser {
			continue
		}
		requests++
		if e.ResponseStatus.Code == http.StatusForbidden {
			refused = append(refused, e.Verb+" "+e.RequestURI)
		}
	}
	g.Expect(s.Err()).NotTo(HaveOccurred())
	return requests, refused
}

// dumpLogs prints the hub pods' logs and the end of each component's log, as far as they can
// be read.
func (f *fixture) dumpLogs(t *testing.T) {
	if err := f.readLogs(context.Background()); err != nil {
		t.Logf("reading the pods' logs: %v", err)
	}
	for pod, log := range f.logs {
		t.Logf("--- pod %s:\n%s", pod, log)
	}
	logs, _ := filepath.Glob(filepath.Join(f.cluster.Dir(), "logs", "*.log"))
	for _, l := range logs {
		if strings.HasSuffix(l, "audit.log") {
			continue
		}
		out, _ := exec.Command("tail", "-n", "30", l).Output()
		t.Logf("--- %s:\n%s", filepath.Base(l), out)
	}
}
