package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Kinds of consumers.
const (
	DeploymentKind  = "Deployment"
	StatefulSetKind = "StatefulSet"
	DaemonSetKind   = "DaemonSet"
)

// Target is the object a placed bundle writes in its member, which its consumers read: a
// ConfigMap, or a Secret.
type Target struct {
	// Secret is whether it is a Secret; else it is a ConfigMap.
	Secret bool
	// Name is its name, in the bundle's namespace.
	Name string
}

// Reads reports whether a pod spec reads target: a configMap or secret volume, a projected
// volume's source, an env[].valueFrom.configMapKeyRef or secretKeyRef, or an envFrom, of any
// container, init containers included.
func Reads(spec *corev1.PodSpec, t Target) bool {
	for _, v := range spec.Volumes {
		if t.Secret && v.Secret != nil && v.Secret.SecretName == t.Name || !t.Secret && v.ConfigMap != nil && v.ConfigMap.Name == t.Name {
			return true
		}
		if v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(s corev1.VolumeProjection) bool {
			return t.Secret && s.Secret != nil && s.Secret.Name == t.Name || !t.Secret && s.ConfigMap != nil && s.ConfigMap.Name == t.Name
		}) {
			return true
		}
	}
	containers := slices.Concat(spec.InitContainers, spec.Containers)
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if t.Secret && e.SecretRef != nil && e.SecretRef.Name == t.Name || !t.Secret && e.ConfigMapRef != nil && e.ConfigMapRef.Name == t.Name {
				return true
			}
		}
		for _, e := range c.Env {
			if f := e.ValueFrom; f != nil && (t.Secret && f.SecretKeyRef != nil && f.SecretKeyRef.Name == t.Name ||
				!t.Secret && f.ConfigMapKeyRef != nil && f.ConfigMapKeyRef.Name == t.Name) {
				return true
			}
		}
	}
	return false
}

// Consumer is a workload that reads a placed bundle, as a rollout judges it.
type Consumer struct {
	// Kind is DeploymentKind, StatefulSetKind or DaemonSetKind.
	Kind string
	// Name is its name.
	Name string
	// RestartedFor is its pod template's hubv1alpha1.RestartedForAnnotation, "" if none.
	RestartedFor string
	// Available is whether it has rolled out its pod template and every replica is available.
	Available bool
	// Problem says why it is not Available; "" if it is.
	Problem string
}

// DeploymentConsumer judges a Deployment: available when its controller observed its
// generation and updated = ready = available = replicas, with no old replica left (status
// replicas = replicas, as `kubectl rollout status` waits for).
func DeploymentConsumer(d *appsv1.Deployment) Consumer {
	c := Consumer{Kind: DeploymentKind, Name: d.Name, RestartedFor: d.Spec.Template.Annotations[hubv1alpha1.RestartedForAnnotation]}
	want, st := replicas(d.Spec.Replicas), d.Status
	if st.ObservedGeneration < d.Generation {
		c.Problem = fmt.Sprintf("generation %d not observed yet", d.Generation)
		return c
	}
	if st.UpdatedReplicas == want && st.ReadyReplicas == want && st.AvailableReplicas == want && st.Replicas == want {
		c.Available = true
		return c
	}
	c.Problem = fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want)
	if old := st.Replicas - st.UpdatedReplicas; old > 0 {
		c.Problem += fmt.Sprintf(" (%d old still running)", old)
	}
	c.Problem += fmt.Sprintf(", %d ready, %d available", st.ReadyReplicas, st.AvailableReplicas)
	for _, cond := range st.Conditions {
		switch {
		case cond.Type == appsv1.DeploymentProgressing && cond.Status == corev1.ConditionFalse,
			cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionFalse:
			c.Problem += fmt.Sprintf("; %s=False %s: %s", cond.Type, cond.Reason, cond.Message)
		}
	}
	return c
}

// StatefulSetConsumer judges a StatefulSet: available when its controller observed its
// generation, currentRevision = updateRevision and every replica is ready.
func StatefulSetConsumer(s *appsv1.StatefulSet) Consumer {
	c := Consumer{Kind: StatefulSetKind, Name: s.Name, RestartedFor: s.Spec.Template.Annotations[hubv1alpha1.RestartedForAnnotation]}
	want, st := replicas(s.Spec.Replicas), s.Status
	switch {
	case st.ObservedGeneration < s.Generation:
		c.Problem = fmt.Sprintf("generation %d not observed yet", s.Generation)
	case st.CurrentRevision != st.UpdateRevision:
		c.Problem = fmt.Sprintf("rolling out revision %s: %d of %d replicas updated, %d ready", st.UpdateRevision, st.UpdatedReplicas, want, st.ReadyReplicas)
	case st.ReadyReplicas != want:
		c.Problem = fmt.Sprintf("%d of %d replicas ready", st.ReadyReplicas, want)
	default:
		c.Available = true
	}
	return c
}

// DaemonSetConsumer judges a DaemonSet: available when its controller observed its generation
// and updated = available = desired.
func DaemonSetConsumer(d *appsv1.DaemonSet) Consumer {
	c := Consumer{Kind: DaemonSetKind, Name: d.Name, RestartedFor: d.Spec.Template.Annotations[hubv1alpha1.RestartedForAnnotation]}
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		c.Problem = fmt.Sprintf("generation %d not observed yet", d.Generation)
	case st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberAvailable != st.DesiredNumberScheduled:
		c.Problem = fmt.Sprintf("%d of %d pods updated, %d available", st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberAvailable)
	default:
		c.Available = true
	}
	return c
}

// replicas is a workload's spec.replicas, 1 if unset.
func replicas(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

// Workloads is where the consumers of one member's bundle stand.
type Workloads struct {
	// Known is whether the member's workloads are watched and were listed: without it nothing
	// is known of its consumers.
	Known bool
	// Problem says why they are not Known, if something stops it (the watch is refused).
	Problem string
	// Consumers are the bundle's consumers in the member, in any order.
	Consumers []Consumer
}

// WorkloadVerdict is where the consumers of one member stand for a revision.
type WorkloadVerdict struct {
	// Done is whether every consumer has rolled out (restarted for the revision, with Restart)
	// and is available: the member counts as updated.
	Done bool
	// Failure, if not "", says why the member fails the revision (WorkloadUnhealthyReason).
	Failure string
	// Wait is when workloadTimeout ends for a member not Done and not failed yet; 0: none.
	Wait time.Duration
	// Consumers say where each consumer stands, sorted by kind and name.
	Consumers []hubv1alpha1.Consumer
}

// JudgeWorkloads judges the consumers w of the bundle of revision that a member holds since
// since, at now, under strategy s: done once every consumer is available (and, with Restart,
// restarted for revision); failed once one is not past workloadTimeout after since, or at once
// while soaking (the member's stage soaks: its consumers must stay available).
func JudgeWorkloads(s *hubv1alpha1.RolloutStrategy, revision int64, w Workloads, since time.Time, soaking bool, now time.Time) WorkloadVerdict {
	timeout := WorkloadTimeout(s)
	late := soaking || (!since.IsZero() && now.Sub(since) >= timeout)
	v := WorkloadVerdict{Done: w.Known}
	var problems []string
	for _, c := range slices.SortedFunc(slices.Values(w.Consumers), byKindAndName) {
		state, problem := hubv1alpha1.ConsumerAvailable, c.Problem
		if s.Workloads == hubv1alpha1.WorkloadsRestart && c.RestartedFor != strconv.FormatInt(revision, 10) {
			problem = fmt.Sprintf("not restarted for revision %d yet", revision)
		}
		if problem != "" || !c.Available {
			v.Done, state = false, hubv1alpha1.ConsumerProgressing
			if late {
				state = hubv1alpha1.ConsumerUnavailable
				problems = append(problems, fmt.Sprintf("%s %s: %s", c.Kind, c.Name, problem))
			}
		}
		if len(v.Consumers) < hubv1alpha1.MaxConsumers {
			v.Consumers = append(v.Consumers, hubv1alpha1.Consumer{Kind: c.Kind, Name: c.Name, State: state, Message: shorten(problem, maxConsumerMessage)})
		}
	}
	if !w.Known && late {
		problems = append(problems, cmp.Or(w.Problem, "its workloads could not be listed"))
	}
	switch {
	case v.Done:
	case len(problems) > 0 && soaking:
		v.Failure = "unavailable during the soak: " + strings.Join(problems, "; ")
	case len(problems) > 0:
		v.Failure = fmt.Sprintf("not available %s after revision %d was written: %s", timeout, revision, strings.Join(problems, "; "))
	case !since.IsZero():
		v.Wait = since.Add(timeout).Sub(now)
	}
	return v
}

// WorkloadTimeout is the rollout's workloadTimeout, or its default.
func WorkloadTimeout(s *hubv1alpha1.RolloutStrategy) time.Duration {
	if s.WorkloadTimeout != nil && s.WorkloadTimeout.Duration > 0 {
		return s.WorkloadTimeout.Duration
	}
	return hubv1alpha1.DefaultWorkloadTimeout
}

// JudgesWorkloads reports whether a rollout judges members by their workloads (Observe or
// Restart).
func JudgesWorkloads(s *hubv1alpha1.RolloutStrategy) bool {
	return s != nil && (s.Workloads == hubv1alpha1.WorkloadsObserve || s.Workloads == hubv1alpha1.WorkloadsRestart)
}

func byKindAndName(a, b Consumer) int {
	return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
}

// maxConsumerMessage bounds a consumer's message in status (its MaxLength).
const maxConsumerMessage = 256

// shorten cuts s to at most n bytes of valid UTF-8, marking the cut with "...".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}

// WorkloadStatus is status.rollout.workloads: for the first MaxWorkloadMembers members (by name)
// of the current stage (where w says) that hold revision u and whose workloads are judged, the
// consumers of their bundle and where each stands, at now.
func WorkloadStatus(s *hubv1alpha1.RolloutStrategy, u int64, w Where, members []Member, now time.Time) []hubv1alpha1.MemberWorkloads {
	var out []hubv1alpha1.MemberWorkloads
	for _, m := range slices.SortedFunc(slices.Values(members), func(a, b Member) int { return strings.Compare(a.Name, b.Name) }) {
		if len(out) == hubv1alpha1.MaxWorkloadMembers {
			break
		}
		if m.Stage != w.Stage || m.Held != u || m.Workloads == nil || m.Paused {
			continue
		}
		v := JudgeWorkloads(s, u, *m.Workloads, m.UpdatedAt, w.Soaking, now)
		out = append(out, hubv1alpha1.MemberWorkloads{Cluster: m.Name, Consumers: v.Consumers})
	}
	return out
}
