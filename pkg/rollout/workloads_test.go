package rollout

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

func TestReads(t *testing.T) {
	cm, secret := Target{Name: "web"}, Target{Secret: true, Name: "web"}
	container := func(c corev1.Container) *corev1.PodSpec { return &corev1.PodSpec{Containers: []corev1.Container{c}} }
	for _, tc := range []struct {
		name   string
		spec   *corev1.PodSpec
		target Target
		want   bool
	}{
		{name: "nothing", spec: &corev1.PodSpec{}, target: cm},
		{name: "configMap volume", spec: &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}}}}, target: cm, want: true},
		{name: "configMap volume of another name", spec: &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "api"}}}}}}, target: cm},
		{name: "configMap volume is no Secret", spec: &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}}}}, target: secret},
		{name: "secret volume", spec: &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "web"}}}}}, target: secret, want: true},
		{name: "secret volume is no ConfigMap", spec: &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "web"}}}}}, target: cm},
		{name: "projected configMap", spec: &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}}}}}}}, target: cm, want: true},
		{name: "projected secret", spec: &corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}}}}}}}, target: secret, want: true},
		{name: "env configMapKeyRef", spec: container(corev1.Container{Env: []corev1.EnvVar{{Name: "A", Value: "a"}, {Name: "B", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}, Key: "k"}}}}}), target: cm, want: true},
		{name: "env secretKeyRef", spec: container(corev1.Container{Env: []corev1.EnvVar{{Name: "B", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}, Key: "k"}}}}}), target: secret, want: true},
		{name: "env secretKeyRef is no ConfigMap", spec: container(corev1.Container{Env: []corev1.EnvVar{{Name: "B", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}, Key: "k"}}}}}), target: cm},
		{name: "env fieldRef", spec: container(corev1.Container{Env: []corev1.EnvVar{{Name: "B", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}), target: cm},
		{name: "envFrom configMapRef", spec: container(corev1.Container{EnvFrom: []corev1.EnvFromSource{{
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}}}), target: cm, want: true},
		{name: "envFrom secretRef", spec: container(corev1.Container{EnvFrom: []corev1.EnvFromSource{{
			SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}}}), target: secret, want: true},
		{name: "an init container's envFrom", spec: &corev1.PodSpec{InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web"}}}}}}}, target: cm, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Reads(tc.spec, tc.target); got != tc.want {
				t.Errorf("Reads = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConsumerAvailability(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "web", Generation: 2}
	deployment := func(st appsv1.DeploymentStatus) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{hubv1alpha1.RestartedForAnnotation: "4"}}}}, Status: st}
	}
	statefulSet := func(st appsv1.StatefulSetStatus) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}, Status: st}
	}
	daemonSet := func(st appsv1.DaemonSetStatus) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: meta, Status: st}
	}
	for _, tc := range []struct {
		name      string
		got       Consumer
		available bool
		// problem is a part of the problem, if not available.
		problem string
	}{
		{name: "Deployment rolled out", available: true, got: DeploymentConsumer(deployment(appsv1.DeploymentStatus{ObservedGeneration: 2,
			Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}))},
		{name: "Deployment generation not observed", problem: "generation 2 not observed", got: DeploymentConsumer(deployment(appsv1.DeploymentStatus{
			ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}))},
		{name: "Deployment rolling", problem: "2 of 3 replicas updated (1 old still running), 3 ready, 3 available", got: DeploymentConsumer(deployment(appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 3, AvailableReplicas: 3}))},
		{name: "Deployment with an old replica left", problem: "3 of 3 replicas updated (1 old still running), 3 ready, 3 available", got: DeploymentConsumer(deployment(appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}))},
		{name: "Deployment unavailable says its conditions", problem: "Progressing=False ProgressDeadlineExceeded: ReplicaSet \"web-1\" has timed out progressing",
			got: DeploymentConsumer(deployment(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-1" has timed out progressing`}}}))},
		{name: "StatefulSet rolled out", available: true, got: StatefulSetConsumer(statefulSet(appsv1.StatefulSetStatus{ObservedGeneration: 2,
			CurrentRevision: "web-2", UpdateRevision: "web-2", ReadyReplicas: 2}))},
		{name: "StatefulSet rolling", problem: "rolling out revision web-3", got: StatefulSetConsumer(statefulSet(appsv1.StatefulSetStatus{ObservedGeneration: 2,
			CurrentRevision: "web-2", UpdateRevision: "web-3", ReadyReplicas: 2}))},
		{name: "StatefulSet not all ready", problem: "1 of 2 replicas ready", got: StatefulSetConsumer(statefulSet(appsv1.StatefulSetStatus{ObservedGeneration: 2,
			CurrentRevision: "web-3", UpdateRevision: "web-3", ReadyReplicas: 1}))},
		{name: "DaemonSet rolled out", available: true, got: DaemonSetConsumer(daemonSet(appsv1.DaemonSetStatus{ObservedGeneration: 2,
			DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4, NumberAvailable: 4}))},
		{name: "DaemonSet not all available", problem: "4 of 4 pods updated, 3 available", got: DaemonSetConsumer(daemonSet(appsv1.DaemonSetStatus{ObservedGeneration: 2,
			DesiredNumberScheduled: 4, UpdatedNumberScheduled: 4, NumberAvailable: 3}))},
		{name: "DaemonSet generation not observed", problem: "not observed", got: DaemonSetConsumer(daemonSet(appsv1.DaemonSetStatus{ObservedGeneration: 1}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got.Available != tc.available || tc.got.Name != "web" {
				t.Fatalf("got %+v, want available %v", tc.got, tc.available)
			}
			if tc.available != (tc.got.Problem == "") || !strings.Contains(tc.got.Problem, tc.problem) {
				t.Errorf("problem %q, want one with %q", tc.got.Problem, tc.problem)
			}
		})
	}
	if got := DeploymentConsumer(deployment(appsv1.DeploymentStatus{})).RestartedFor; got != "4" {
		t.Errorf("RestartedFor = %q, want 4", got)
	}
}

func TestJudgeWorkloads(t *testing.T) {
	restart := strategy(func(s *hubv1alpha1.RolloutStrategy) { s.Workloads = hubv1alpha1.WorkloadsRestart })
	observe := strategy(func(s *hubv1alpha1.RolloutStrategy) {
		s.Workloads, s.WorkloadTimeout = hubv1alpha1.WorkloadsObserve, &metav1.Duration{Duration: time.Minute}
	})
	ok := Consumer{Kind: DeploymentKind, Name: "web", RestartedFor: "2", Available: true}
	down := Consumer{Kind: DeploymentKind, Name: "api", RestartedFor: "2", Problem: "1 of 2 replicas updated, 1 ready, 1 available"}
	old := Consumer{Kind: StatefulSetKind, Name: "db", RestartedFor: "1", Available: true}
	for _, tc := range []struct {
		name    string
		s       *hubv1alpha1.RolloutStrategy
		w       Workloads
		since   time.Duration // before now
		soaking bool
		done    bool
		failure string // a part of the failure, "" for none
		wait    time.Duration
		states  []hubv1alpha1.ConsumerState
	}{
		{name: "no consumer: done", s: restart, w: Workloads{Known: true}, since: time.Second, done: true},
		{name: "not known yet: waits", s: restart, w: Workloads{}, since: time.Second, wait: 5*time.Minute - time.Second},
		{name: "not known past the timeout: fails", s: restart, w: Workloads{Problem: "listing deployments: forbidden"}, since: 6 * time.Minute,
			failure: "listing deployments: forbidden"},
		{name: "all available and restarted: done", s: restart, w: Workloads{Known: true, Consumers: []Consumer{ok}}, since: time.Second, done: true,
			states: []hubv1alpha1.ConsumerState{hubv1alpha1.ConsumerAvailable}},
		{name: "restart: not restarted for the revision waits", s: restart, w: Workloads{Known: true, Consumers: []Consumer{ok, old}}, since: time.Minute,
			wait: 4 * time.Minute, states: []hubv1alpha1.ConsumerState{hubv1alpha1.ConsumerAvailable, hubv1alpha1.ConsumerProgressing}},
		{name: "observe: the restart annotation does not matter", s: observe, w: Workloads{Known: true, Consumers: []Consumer{ok, old}}, since: time.Second, done: true,
			states: []hubv1alpha1.ConsumerState{hubv1alpha1.ConsumerAvailable, hubv1alpha1.ConsumerAvailable}},
		{name: "unavailable within the timeout waits", s: observe, w: Workloads{Known: true, Consumers: []Consumer{ok, down}}, since: 10 * time.Second,
			wait: 50 * time.Second, states: []hubv1alpha1.ConsumerState{hubv1alpha1.ConsumerProgressing, hubv1alpha1.ConsumerAvailable}},
		{name: "unavailable past the timeout fails naming it", s: observe, w: Workloads{Known: true, Consumers: []Consumer{ok, down}}, since: time.Minute,
			failure: "not available 1m0s after revision 2 was written: Deployment api: 1 of 2 replicas updated",
			states:  []hubv1alpha1.ConsumerState{hubv1alpha1.ConsumerUnavailable, hubv1alpha1.ConsumerAvailable}},
		{name: "unavailable during the soak fails at once", s: observe, w: Workloads{Known: true, Consumers: []Consumer{down}}, since: time.Second, soaking: true,
			failure: "unavailable during the soak: Deployment api", states: []hubv1alpha1.ConsumerState{hubv1alpha1.ConsumerUnavailable}},
		{name: "restart: not restarted past the timeout fails", s: restart, w: Workloads{Known: true, Consumers: []Consumer{old}}, since: 5 * time.Minute,
			failure: "StatefulSet db: not restarted for revision 2 yet", states: []hubv1alpha1.ConsumerState{hubv1alpha1.ConsumerUnavailable}},
		{name: "available during the soak: done", s: observe, w: Workloads{Known: true, Consumers: []Consumer{ok}}, since: time.Second, soaking: true, done: true,
			states: []hubv1alpha1.ConsumerState{hubv1alpha1.ConsumerAvailable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := JudgeWorkloads(tc.s, 2, tc.w, t0.Add(-tc.since), tc.soaking, t0)
			if v.Done != tc.done || v.Wait != tc.wait || (tc.failure == "") != (v.Failure == "") || !strings.Contains(v.Failure, tc.failure) {
				t.Errorf("got done %v, wait %s, failure %q; want done %v, wait %s, failure with %q", v.Done, v.Wait, v.Failure, tc.done, tc.wait, tc.failure)
			}
			var states []hubv1alpha1.ConsumerState
			for _, c := range v.Consumers {
				states = append(states, c.State)
			}
			if len(states) != len(tc.states) || !equalStates(states, tc.states) {
				t.Errorf("states %v, want %v", states, tc.states)
			}
		})
	}
}

func equalStates(a, b []hubv1alpha1.ConsumerState) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDecideWorkloads: a member's consumers hold its stage, and fail the revision as a refused
// write does.
func TestDecideWorkloads(t *testing.T) {
	restart := func(s *hubv1alpha1.RolloutStrategy) { s.Workloads = hubv1alpha1.WorkloadsRestart }
	rollback := func(s *hubv1alpha1.RolloutStrategy) { s.OnFailure = hubv1alpha1.OnFailureRollback }
	with := func(m Member, cs ...Consumer) Member {
		m.Workloads = &Workloads{Known: true, Consumers: cs}
		return m
	}
	up := Consumer{Kind: DeploymentKind, Name: "web", RestartedFor: "2", Available: true}
	down := Consumer{Kind: DeploymentKind, Name: "web", RestartedFor: "2", Problem: "0 of 1 replicas updated, 0 ready, 0 available"}
	late := func(m Member) Member { m.UpdatedAt = t0.Add(-10 * time.Minute); return m }
	soaking := rolling("canary", "c1", hubv1alpha1.RolloutSoaking)
	soaking.SoakStartTime = ptr.To(metav1.NewMicroTime(t0.Add(-10 * time.Second)))
	for _, tc := range []struct {
		name    string
		s       *hubv1alpha1.RolloutStrategy
		ro      *hubv1alpha1.RolloutStatus
		members []Member
		phase   hubv1alpha1.RolloutPhase
		failed  string // the reason of c1's failure, "" for none
	}{
		{name: "consumers available: the stage soaks", s: strategy(restart), ro: rolling("canary", "c1", hubv1alpha1.RolloutProgressing),
			members: []Member{with(member("c1", 0, 2, true), up), member("r1", 1, 1, true)}, phase: hubv1alpha1.RolloutSoaking},
		{name: "a consumer not available yet holds the stage", s: strategy(restart), ro: rolling("canary", "c1", hubv1alpha1.RolloutProgressing),
			members: []Member{with(member("c1", 0, 2, true), down), member("r1", 1, 1, true)}, phase: hubv1alpha1.RolloutProgressing},
		{name: "a consumer not available past the timeout halts", s: strategy(restart), ro: rolling("canary", "c1", hubv1alpha1.RolloutProgressing),
			members: []Member{late(with(member("c1", 0, 2, true), down)), member("r1", 1, 1, true)}, phase: hubv1alpha1.RolloutHalted,
			failed: hubv1alpha1.WorkloadUnhealthyReason},
		{name: "and rolls back with onFailure Rollback", s: strategy(restart, rollback), ro: rolling("canary", "c1", hubv1alpha1.RolloutProgressing),
			members: []Member{late(with(member("c1", 0, 2, true), down)), member("r1", 1, 1, true)}, phase: hubv1alpha1.RolloutRolledBack,
			failed: hubv1alpha1.WorkloadUnhealthyReason},
		{name: "a consumer unavailable during the soak halts at once", s: strategy(restart), ro: soaking,
			members: []Member{with(member("c1", 0, 2, true), down), member("r1", 1, 1, true)}, phase: hubv1alpha1.RolloutHalted,
			failed: hubv1alpha1.WorkloadUnhealthyReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{Strategy: tc.s, Status: hubv1alpha1.FleetBundleStatus{CurrentRevision: 1, UpdateRevision: 2, Rollout: tc.ro},
				Update: 2, Members: tc.members, Now: t0})
			if d.Rollout.Phase != tc.phase {
				t.Errorf("phase %s, want %s (%s)", d.Rollout.Phase, tc.phase, d.Rollout.Message)
			}
			if f := d.Failed["c1"]; f.Reason != tc.failed || (tc.failed != "" && !strings.Contains(d.Rollout.Message, "Deployment web")) {
				t.Errorf("failure %+v, message %q; want reason %q naming Deployment web", f, d.Rollout.Message, tc.failed)
			}
		})
	}
}
