//go:build kind

package kind_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// The application of the workloads step: test/kind/testapp, built into an image and loaded into
// the members; ready unless its value starts with "bad".
const (
	appImage   = "configbundle.dev/testapp:kind-e2e"
	appPackage = "./test/kind/testapp"
	appName    = "testapp"
	// appTimeout bounds a Deployment of testapp rolling out on a kind node.
	appTimeout = 3 * time.Minute
)

// checkRolloutJudgedByItsApplication places a FleetBundle with workloads Restart and a canary
// stage into both members, each running testapp reading the bundle's message: a good value
// restarts each Deployment and completes; a bad one makes the canary's Pod unready, so the
// rollout rolls back with WorkloadUnhealthy naming the Deployment, the canary's Deployment is
// restarted on the old value, and the other member is never written nor restarted.
func checkRolloutJudgedByItsApplication(t *testing.T, hubc client.Client, memberc map[string]client.Client, ns string) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	canary, rest := memberNames[0], memberNames[1]
	mc := memberCluster(hubc, canary)(g)
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Labels["ring"] = "canary"
	g.Expect(hubc.Patch(ctx, mc, patch)).To(Succeed(), "labelling MemberCluster %s ring=canary", canary)

	fb := &hubv1alpha1.FleetBundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: appName},
		Spec: hubv1alpha1.FleetBundleSpec{
			ClusterSelector: &metav1.LabelSelector{},
			Template:        hubv1alpha1.ConfigBundleTemplate{Spec: configbundlev1alpha1.ConfigBundleSpec{Message: "good-1"}},
			Rollout: &hubv1alpha1.RolloutStrategy{
				Workloads:       hubv1alpha1.WorkloadsRestart,
				WorkloadTimeout: &metav1.Duration{Duration: 40 * time.Second},
				OnFailure:       hubv1alpha1.OnFailureRollback,
				Stages: []hubv1alpha1.RolloutStage{{Name: "canary",
					ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}},
					SoakTime:        &metav1.Duration{Duration: 5 * time.Second}}},
			},
		},
	}
	g.Expect(hubc.Create(ctx, fb)).To(Succeed())
	t.Cleanup(func() { _ = hubc.Delete(context.Background(), fb) })
	for _, name := range memberNames {
		g.Expect(memberc[name].Create(ctx, appDeployment(ns))).To(Succeed(), "Deployment %s in %s", appName, name)
	}
	key := client.ObjectKeyFromObject(fb)
	rollout := func(g Gomega) *hubv1alpha1.RolloutStatus {
		got := &hubv1alpha1.FleetBundle{}
		g.Expect(hubc.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Rollout).NotTo(BeNil())
		return got.Status.Rollout
	}
	g.Eventually(rollout).WithTimeout(appTimeout).WithPolling(interval).
		Should(HaveField("Phase", hubv1alpha1.RolloutComplete), "revision 1 complete with both applications available")
	restartedFor := map[string]string{}
	generation := map[string]int64{}
	for _, name := range memberNames {
		d := appAvailable(g, memberc[name], ns)
		restartedFor[name], generation[name] = d.Spec.Template.Annotations[hubv1alpha1.RestartedForAnnotation], d.Generation
	}
	t.Logf("FleetBundle %s complete; testapp restarted for %v", key, restartedFor)

	// A bad value: the canary's application never turns ready, and the rollout rolls back.
	g.Expect(hubc.Get(ctx, key, fb)).To(Succeed())
	fb.Spec.Template.Spec.Message = "bad-2"
	g.Expect(hubc.Update(ctx, fb)).To(Succeed())
	g.Eventually(rollout).WithTimeout(appTimeout).WithPolling(interval).Should(And(
		HaveField("Phase", hubv1alpha1.RolloutRolledBack),
		HaveField("Message", And(ContainSubstring(hubv1alpha1.WorkloadUnhealthyReason), ContainSubstring("Deployment "+appName))),
	), "the canary's own Deployment rolls the rollout back")
	t.Logf("rolled back: %s", rollout(g).Message)
	g.Eventually(func(g Gomega) string {
		d := appAvailable(g, memberc[canary], ns)
		g.Expect(d.Generation).To(BeNumerically(">=", generation[canary]+2), "restarted for the bad value, then for the old one")
		return d.Spec.Template.Annotations[hubv1alpha1.RestartedForAnnotation]
	}).WithTimeout(appTimeout).WithPolling(interval).Should(Equal(restartedFor[canary]), "the canary's application back on the old value")
	cm := &corev1.ConfigMap{}
	g.Expect(memberc[canary].Get(ctx, client.ObjectKey{Namespace: ns, Name: appName}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue(configbundlev1alpha1.MessageKey, "good-1"))
	// The other member: its ConfigMap and its Deployment as they were.
	g.Expect(memberc[rest].Get(ctx, client.ObjectKey{Namespace: ns, Name: appName}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue(configbundlev1alpha1.MessageKey, "good-1"), "the bad value never reached %s", rest)
	d := appAvailable(g, memberc[rest], ns)
	g.Expect(d.Generation).To(Equal(generation[rest]), "%s's application was not restarted", rest)
	for _, name := range memberNames {
		g.Expect(memberc[name].Delete(ctx, appDeployment(ns))).To(Succeed())
	}
	g.Expect(hubc.Delete(ctx, fb)).To(Succeed())
}

// appAvailable returns the member's testapp Deployment once it has rolled out and is available.
func appAvailable(g Gomega, c client.Client, ns string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: appName}, d)).To(Succeed())
	g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
	g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(1)))
	g.Expect(d.Status.AvailableReplicas).To(Equal(int32(1)))
	g.Expect(d.Status.Replicas).To(Equal(int32(1)))
	return d
}

// appDeployment is testapp reading the bundle's message as VALUE, ready per its /readyz.
func appDeployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": appName}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: appName},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: appName, Image: appImage, ImagePullPolicy: corev1.PullNever,
						Env: []corev1.EnvVar{{Name: "VALUE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: appName}, Key: configbundlev1alpha1.MessageKey}}}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
							PeriodSeconds: 1, FailureThreshold: 1,
						},
					}},
				},
			},
		},
	}
}
