package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/pkg/tenancy"
)

// tenantUser is the tenant the tests impersonate: bound to the FleetBundle editor role in
// namespace tenantNS, and nothing else but what config/rbac/hub grants every authenticated user.
const (
	tenantUser = "team-a-dev"
	tenantNS   = "team-a"
)

// TestTenantCommands: a tenant bound to configbundle-hub-fleetbundle-editor in its namespace
// alone, impersonated (kubectl --as), runs hub render (of a FleetBundle and of a manifest),
// hub status --fleet-bundle and hub rollout status and history for the FleetBundles of its
// namespace, against a hub with the shipped roles (config/rbac/hub); it may not read the
// MemberClusters, and sees the names and labels of the members of its bound set in its
// ClusterSetBinding's status.
func TestTenantCommands(t *testing.T) {
	cp, c := startHubControlPlane(t, controlplane.Options{})
	applyFiles(t, c, filepath.Join("..", "config", "rbac", "hub", "tenancy_roles.yaml"), filepath.Join("..", "config", "rbac", "hub", "fleet_reader.yaml"))
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS}})
	mustCreate(t, c, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "team-a-fleetbundles"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: hubv1alpha1.FleetBundleEditorRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenantUser}},
	})
	tenantFleet(t, c)
	kubeconfig := impersonatingKubeconfig(t, cp.KubeconfigPath, tenantUser)
	as := func(args ...string) (int, string, string) {
		t.Helper()
		code, stdout, stderr := run(t, append(args, "--hub-kubeconfig", kubeconfig)...)
		t.Logf("$ hub %s (as %s)\nexit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), tenantUser, code, stdout, stderr)
		return code, stdout, stderr
	}

	if code, stdout, _ := as("render", "web", "-n", tenantNS); code != exitOK || !strings.Contains(stdout, "# member: eu-1\n") ||
		!strings.Contains(stdout, "message: hello eu-1\n") || !strings.Contains(stdout, "# member: us-1\n") || strings.Contains(stdout, "dev-1") {
		t.Errorf("hub render web: exit %d; want eu-1 and us-1 rendered (team-a's set), not dev-1", code)
	}
	if code, stdout, _ := as("render", "web", "-n", tenantNS, "--cluster", "us-1"); code != exitOK || !strings.Contains(stdout, "message: hello us-1\n") {
		t.Errorf("hub render web --cluster us-1: exit %d; want us-1 rendered", code)
	}
	if code, _, stderr := as("render", "web", "-n", tenantNS, "--cluster", "dev-1"); code != exitFailure || !strings.Contains(stderr, "no MemberCluster dev-1") {
		t.Errorf("hub render web --cluster dev-1: exit %d; want exit 1: dev-1 is in no set of team-a's", code)
	}
	manifest := strings.NewReplacer("name: preview", "name: api\n  namespace: "+tenantNS, "env: dev", "env: prod").Replace(previewManifest)
	if code, stdout, stderr := as("render", "-f", writeManifest(t, manifest)); code != exitOK || stderr != "" || !strings.Contains(stdout, "message: preview us-1\n") {
		t.Errorf("hub render -f: exit %d; want us-1 rendered, validated by a dry run (the editor may create FleetBundles)", code)
	}
	if code, stdout, _ := as("status", "--fleet-bundle", tenantNS+"/web"); code != exitOK || !strings.Contains(stdout, "Healthy: every FleetBundle named ("+tenantNS+"/web) is Ready") {
		t.Errorf("hub status --fleet-bundle %s/web: exit %d; want exit 0, Healthy", tenantNS, code)
	}
	if code, _, _ := as("status"); code != exitFailure {
		t.Errorf("hub status (every FleetBundle): exit %d; want exit 1: a tenant may not list those of other namespaces", code)
	}
	if code, stdout, _ := as("rollout", "status", "web", "-n", tenantNS, "--watch=false"); code != exitOK || !strings.Contains(stdout, "web") {
		t.Errorf("hub rollout status web: exit %d; want exit 0", code)
	}
	if code, _, _ := as("rollout", "history", "web", "-n", tenantNS); code != exitOK {
		t.Errorf("hub rollout history web: exit %d; want exit 0", code)
	}

	// What the tenant sees of the members: its binding's list, not the MemberClusters.
	tenant := clientOf(t, kubeconfig)
	if err := tenant.List(t.Context(), &hubv1alpha1.MemberClusterList{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing MemberClusters as %s: %v; want Forbidden", tenantUser, err)
	}
	b := &hubv1alpha1.ClusterSetBinding{}
	if err := tenant.Get(t.Context(), client.ObjectKey{Namespace: tenantNS, Name: tenantNS}, b); err != nil {
		t.Fatal(err)
	}
	if got := b.Status.Clusters; len(got) != 2 || got[0].Name != "eu-1" || got[0].Labels["region"] != "eu" || got[1].Name != "us-1" {
		t.Errorf("ClusterSetBinding %s/%s as %s lists %+v; want eu-1 and us-1 with their labels", tenantNS, tenantNS, tenantUser, got)
	}
}

// tenantFleet creates the MemberClusters eu-1, us-1 (env prod) and dev-1, the Fleet (Ready,
// fresh), the ClusterSet team-a of the prod members bound into team-a (its status as the hub
// writes it), and the FleetBundle team-a/web of every member of the set, Ready.
func tenantFleet(t *testing.T, c client.Client) {
	t.Helper()
	now := metav1.Now()
	ready := []metav1.Condition{{Type: hubv1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: hubv1alpha1.AllReadyReason, Message: "ready", LastTransitionTime: now, ObservedGeneration: 1}}
	f := &hubv1alpha1.Fleet{ObjectMeta: metav1.ObjectMeta{Name: hubv1alpha1.FleetName}}
	mustCreate(t, c, f)
	f.Status = hubv1alpha1.FleetStatus{HeartbeatTime: &now, HeartbeatIntervalSeconds: 10, Conditions: ready}
	mustUpdateStatus(t, c, f)
	var members []hubv1alpha1.MemberCluster
	for name, labels := range map[string]map[string]string{
		"eu-1": {"env": "prod", "region": "eu"}, "us-1": {"env": "prod", "region": "us"}, "dev-1": {"env": "dev"},
	} {
		mc := hubv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: hubv1alpha1.MemberClusterSpec{SecretRef: hubv1alpha1.SecretReference{Namespace: hubv1alpha1.DefaultSecretNamespace, Name: name}}}
		mustCreate(t, c, &mc)
		members = append(members, mc)
	}
	set := &hubv1alpha1.ClusterSet{ObjectMeta: metav1.ObjectMeta{Name: tenantNS},
		Spec: hubv1alpha1.ClusterSetSpec{ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}}
	mustCreate(t, c, set)
	binding := &hubv1alpha1.ClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: tenantNS},
		Spec: hubv1alpha1.ClusterSetBindingSpec{ClusterSet: tenantNS}}
	mustCreate(t, c, binding)
	binding.Status = tenancy.ClusterSetBindingStatus(binding, true)
	binding.Status.Clusters, binding.Status.ClusterCount = tenancy.BoundClusters(set, members)
	mustUpdateStatus(t, c, binding)
	fb := &hubv1alpha1.FleetBundle{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "web"},
		Spec: goTemplate(&metav1.LabelSelector{}, "hello {{ .Cluster.Name }}", nil)}
	mustCreate(t, c, fb)
	fb.Status.ObservedGeneration, fb.Status.Conditions = fb.Generation, ready
	fb.Status.Clusters = hubv1alpha1.PlacementCounts{Selected: 2, Applied: 2, Ready: 2, Updated: 2}
	fb.Status.UpdateRevision, fb.Status.CurrentRevision = 1, 1
	mustUpdateStatus(t, c, fb)
}

// applyFiles creates the objects of manifest files, as kubectl create -f does.
func applyFiles(t *testing.T, c client.Client, paths ...string) {
	t.Helper()
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			mustCreate(t, c, obj)
		}
	}
}

// impersonatingKubeconfig writes a copy of the kubeconfig that acts as user (kubectl --as).
func impersonatingKubeconfig(t *testing.T, path, user string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range kc.AuthInfos {
		auth.Impersonate = user
	}
	out := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// clientOf is a client of the hub through a kubeconfig file.
func clientOf(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	f := rolloutFlags{clusterFlags: clusterFlags{hubKubeconfig: kubeconfig}}
	c, err := f.client()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
