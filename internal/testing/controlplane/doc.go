// Package controlplane starts real, throwaway Kubernetes control planes for tests, demos
// and benchmarks: each one is an etcd and a kube-apiserver started through
// controller-runtime's envtest, optionally joined by a kube-controller-manager that runs
// only the garbage collector, so that deleting an owner really cascades to the objects
// that name it in their ownerReferences. Start brings up any number of them in parallel,
// each in its own temporary directory with its own admin credentials and self-contained
// kubeconfig; Pause and Resume freeze and thaw one kube-apiserver (Linux only) to simulate
// a hung member; KillAPIServer and StartAPIServer crash it and start it again on the same port
// and etcd, and SecondAPIServer serves the same etcd through a second kube-apiserver, to change
// objects behind the back of the first one's clients (Linux only); Stop tears one down and
// removes everything it wrote. The binaries are
// taken from Options.BinaryAssetsDirectory, which defaults to $KUBEBUILDER_ASSETS.
package controlplane
