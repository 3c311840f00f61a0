// Package spokeprovider is the hub's multicluster-runtime Provider: it discovers member clusters
// from labelled kubeconfig Secrets in one hub namespace and connects to them safely.
//
// Every Secret in the namespace that carries the label (value "true") is a member named after
// the Secret. Its kubeconfig is sanitised before anything connects (kubeconfig.RESTConfig):
// no exec plugin, no auth-provider, no local file. Connecting happens in the background with a
// deadline, so an unreachable, hanging or forbidden member never delays another. A member is
// engaged with the manager only once it answered, its identity (kube-system uid) is known to be
// unique, its CRDs are present and its caches are warm. It is then probed every ProbeInterval;
// after consecutive failures it is reported Unreachable and Connected reports an error, so that
// reconcilers back off instead of blocking on it. A changed kubeconfig is connected and checked
// before it replaces the old connection (make before break). Removing the label or the Secret
// disengages the member and changes nothing in it.
//
// What the provider knows of each member is its State, which the hub publishes as a
// MemberCluster.
package spokeprovider
