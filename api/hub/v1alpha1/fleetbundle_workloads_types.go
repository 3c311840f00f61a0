package v1alpha1

import "time"

// WorkloadPolicy is what a rollout does with the workloads that read a placed bundle (its
// consumers) in each member: spec.rollout.workloads.
// +kubebuilder:validation:Enum=Ignore;Observe;Restart
type WorkloadPolicy string

// Workload policies of spec.rollout.workloads.
const (
	// WorkloadsIgnore: the consumers are not looked at; a member is updated once its bundle of
	// the revision is Ready. The default.
	WorkloadsIgnore WorkloadPolicy = "Ignore"
	// WorkloadsObserve: the consumers are not restarted; a member is updated once every
	// consumer is available, and each must stay available through the stage's soak.
	WorkloadsObserve WorkloadPolicy = "Observe"
	// WorkloadsRestart: when a member gets a revision, the hub restarts each consumer by
	// setting RestartedForAnnotation on its pod template (as `kubectl rollout restart` does);
	// the member is updated once every consumer has rolled out and is available.
	WorkloadsRestart WorkloadPolicy = "Restart"
)

// Defaults and bounds of the workloads of a rollout.
const (
	// DefaultWorkloadTimeout is the default of spec.rollout.workloadTimeout.
	DefaultWorkloadTimeout = 5 * time.Minute
	// MaxWorkloadMembers is how many members status.rollout.workloads lists.
	MaxWorkloadMembers = 10
	// MaxConsumers is how many consumers of one member status.rollout.workloads lists.
	MaxConsumers = 10
)

// RestartedForAnnotation is the pod-template annotation by which the hub restarts a consumer
// (spec.rollout.workloads Restart): its value is the revision the consumer was restarted for.
// The hub sets it once per consumer and revision; a consumer that carries it already is not
// restarted again.
const RestartedForAnnotation = "configbundle.dev/restartedFor"

// WorkloadUnhealthyReason (a failedClusters entry, and a member's failure of a rollout): a
// consumer of the member's bundle was not available within spec.rollout.workloadTimeout after
// the member got the revision, or became unavailable during the stage's soak. The message names
// the workload and what is wrong with it.
const WorkloadUnhealthyReason = "WorkloadUnhealthy"

// ConsumerState is where one consumer of a placed bundle stands.
// +kubebuilder:validation:Enum=Available;Progressing;Unavailable
type ConsumerState string

// States of a consumer.
const (
	// ConsumerAvailable: the consumer has rolled out (restarted for the member's revision,
	// with Restart) and every replica is available.
	ConsumerAvailable ConsumerState = "Available"
	// ConsumerProgressing: the consumer is being restarted or rolled out, within
	// workloadTimeout.
	ConsumerProgressing ConsumerState = "Progressing"
	// ConsumerUnavailable: the consumer is not available past workloadTimeout, or stopped being
	// available during the soak: the member fails the revision (WorkloadUnhealthyReason).
	ConsumerUnavailable ConsumerState = "Unavailable"
)

// MemberWorkloads are the consumers of one member's placed bundle.
type MemberWorkloads struct {
	// cluster is the MemberCluster's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// consumers are the first MaxConsumers consumers, sorted by kind and name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Consumers []Consumer `json:"consumers,omitempty"`
}

// Consumer is a workload that reads a placed bundle, and where it stands.
type Consumer struct {
	// kind is Deployment, StatefulSet or DaemonSet.
	// +required
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet
	Kind string `json:"kind"`

	// name is the workload's name, in the bundle's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// state is Available, Progressing or Unavailable.
	// +required
	State ConsumerState `json:"state"`

	// message says what the workload waits for or what is wrong with it.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`
}
