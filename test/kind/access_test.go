//go:build kind

package kind_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/yaml"
)

// What config/default names, and where the hub cluster keeps its audit policy and log (in its
// control-plane node and in its API server's Pod alike).
const (
	hubServiceAccount = "configbundle-hub"
	metricsService    = "configbundle-hub-metrics"
	metricsReader     = "configbundle-hub-metrics-reader"
	auditPolicyDir    = "/etc/kubernetes/audit"
	auditLogDir       = "/var/log/kubernetes/audit"
)

// hubUser is the user the hub's pods reach the API server as.
const hubUser = "system:serviceaccount:" + hubNamespace + ":" + hubServiceAccount

// auditPolicy logs each request of the hub's ServiceAccount once, with its response code, and
// nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["` + hubUser + `"]
- level: None
`

// auditPatch turns the API server's audit log on in the ClusterConfiguration kind gives kubeadm
// (v1beta4 for this Kubernetes version).
const auditPatch = `- op: add
  path: /apiServer/extraArgs/-
  value: {name: audit-policy-file, value: ` + auditPolicyDir + `/policy.yaml}
- op: add
  path: /apiServer/extraArgs/-
  value: {name: audit-log-path, value: ` + auditLogDir + `/audit.log}
- op: add
  path: /apiServer/extraVolumes
  value:
  - {name: audit-policy, hostPath: ` + auditPolicyDir + `, mountPath: ` + auditPolicyDir + `, readOnly: true, pathType: Directory}
  - {name: audit-log, hostPath: ` + auditLogDir + `, mountPath: ` + auditLogDir + `, pathType: DirectoryOrCreate}
`

// hubClusterConfig is the kind config of the hub cluster: KIND_E2E_CONFIG's, or kind's default,
// with the API server's audit log of the hub's requests turned on; the policy is mounted into the
// control-plane node from a directory of the test.
func hubClusterConfig(t *testing.T) *v1alpha4.Cluster {
	t.Helper()
	cfg := &v1alpha4.Cluster{}
	if path := os.Getenv("KIND_E2E_CONFIG"); path != "" {
		if err := yaml.UnmarshalStrict(readFile(t, path), cfg); err != nil {
			t.Fatalf("kind config %s: %v", path, err)
		}
	}
	if len(cfg.Nodes) == 0 {
		cfg.Nodes = []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole}}
	}
	policyDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(policyDir, "policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Nodes {
		if cfg.Nodes[i].Role == v1alpha4.ControlPlaneRole {
			cfg.Nodes[i].ExtraMounts = append(cfg.Nodes[i].ExtraMounts,
				v1alpha4.Mount{HostPath: policyDir, ContainerPath: auditPolicyDir, Readonly: true})
		}
	}
	cfg.KubeadmConfigPatchesJSON6902 = append(cfg.KubeadmConfigPatchesJSON6902, v1alpha4.PatchJSON6902{
		Group: "kubeadm.k8s.io", Version: "v1beta4", Kind: "ClusterConfiguration", Patch: auditPatch,
	})
	return cfg
}

// checkMetricsAccess: the hub's metrics Service, reached at its ClusterIP from the hub's node
// (through kube-proxy), answers a ServiceAccount bound to the metrics reader role, and refuses a
// request without a token (401) and one of a ServiceAccount without that binding (403).
func checkMetricsAccess(t *testing.T, cs kubernetes.Interface, node nodes.Node) {
	t.Helper()
	g := NewWithT(t)
	svc, err := cs.CoreV1().Services(hubNamespace).Get(t.Context(), metricsService, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	url := "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))) + "/metrics"
	reader, stranger := serviceAccountToken(t, cs, "metrics-scraper", metricsReader), serviceAccountToken(t, cs, "stranger", "")
	g.Eventually(func(g Gomega) string {
		code, body := scrape(g, node, url, reader)
		g.Expect(code).To(Equal(http.StatusOK), body)
		return body
	}).WithTimeout(settleTimeout).WithPolling(interval).Should(ContainSubstring("configbundle_build_info"), "a scrape by %s", metricsReader)
	code, body := scrape(g, node, url, "")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "a scrape without a token: %s", body)
	code, body = scrape(g, node, url, stranger)
	g.Expect(code).To(Equal(http.StatusForbidden), "a scrape by a ServiceAccount without get on /metrics: %s", body)
	t.Logf("metrics Service %s: 200 to %s, 401 without a token, 403 to a ServiceAccount without the role", url, metricsReader)
}

// scrape GETs url from the node with curl, with the bearer token (given on stdin) unless it is
// empty, and returns the status code and the body. The hub's certificate is self-signed (no
// --metrics-cert-dir): not verified.
func scrape(g Gomega, n nodes.Node, url, token string) (int, string) {
	args := []string{"-sS", "-k", "--max-time", "10", "-w", "\n%{http_code}"}
	var stdin bytes.Buffer
	if token != "" {
		args = append(args, "-H", "@-")
		stdin.WriteString("Authorization: Bearer " + token + "\n")
	}
	var out, stderr bytes.Buffer
	err := n.Command("curl", append(args, url)...).SetStdin(&stdin).SetStdout(&out).SetStderr(&stderr).Run()
	g.Expect(err).NotTo(HaveOccurred(), "curl %s: %s", url, stderr.String())
	i := strings.LastIndexByte(out.String(), '\n')
	g.Expect(i).To(BeNumerically(">=", 0), "curl printed no status code: %q", out.String())
	code, err := strconv.Atoi(out.String()[i+1:])
	g.Expect(err).NotTo(HaveOccurred())
	return code, out.String()[:i]
}

// serviceAccountToken creates a ServiceAccount in the default namespace, bound to clusterRole
// unless it is empty, and returns a token of it.
func serviceAccountToken(t *testing.T, cs kubernetes.Interface, name, clusterRole string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	if clusterRole != "" {
		_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceDefault, Name: name}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	tr, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// checkNoRefusal reads the hub cluster's audit log in its control-plane node: the hub's pods
// made their requests as the ServiceAccount of config/default, and the API server refused none
// of them (403): the shipped RBAC grants all the hub does.
func checkNoRefusal(t *testing.T, node nodes.Node) {
	t.Helper()
	g := NewWithT(t)
	var log, stderr bytes.Buffer
	g.Expect(node.Command("cat", auditLogDir+"/audit.log").SetStdout(&log).SetStderr(&stderr).Run()).
		To(Succeed(), "reading the audit log: %s", stderr.String())
	requests, refused := 0, []string{}
	s := bufio.NewScanner(&log)
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
			refused = append(refused, fmt.Sprintf("%s %s", e.Verb, e.RequestURI))
		}
	}
	g.Expect(s.Err()).NotTo(HaveOccurred())
	g.Expect(requests).To(BeNumerically(">", 0), "the hub's requests are made as %s", hubUser)
	g.Expect(refused).To(BeEmpty(), "requests of %s refused", hubUser)
	t.Logf("audit log: %d requests of %s, none refused", requests, hubUser)
}
