package controlplane

import (
	"strconv"
	"strings"
)

// slimAPIGroups are the only API groups a slim kube-apiserver serves: what a multi-cluster
// controller of ConfigMaps and custom resources uses (core v1, CRDs, events, RBAC and the
// review APIs) and what the kube-apiserver needs itself to start (the aggregator's
// APIServices, the Service IP allocator's ServiceCIDRs and IPAddresses, the EndpointSlices of
// the kubernetes Service, Leases). Every other group (apps, batch, policy, storage, ...)
// costs memory (storage, watch caches, OpenAPI) and CPU (their controllers) for nothing.
var slimAPIGroups = []string{
	"v1", "apiextensions.k8s.io/v1", "events.k8s.io/v1", "rbac.authorization.k8s.io/v1",
	"authorization.k8s.io/v1", "authentication.k8s.io/v1", "coordination.k8s.io/v1",
	"apiregistration.k8s.io/v1", "networking.k8s.io/v1", "discovery.k8s.io/v1",
}

// slimDisabledAdmission are the default admission plugins a slim kube-apiserver turns off:
// those of pods, nodes, storage, certificates, quotas and the webhook and policy plugins
// (their API groups are not served). NamespaceLifecycle stays: it is the one that matters to
// ConfigMaps and custom resources.
var slimDisabledAdmission = []string{
	"LimitRanger", "ServiceAccount", "TaintNodesByCondition", "PodSecurity", "Priority",
	"DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection", "PodGroupProtection",
	"PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
	"ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass", "PodTopologyLabels",
	"PodGroupWorkloadExists", "NodeDeclaredFeatureValidator", "JobValidation", "PodResizeValidator",
	"MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook",
	"ResourceQuota",
}

// slimUncached are the resources whose watch cache a slim kube-apiserver turns off: all it
// serves but ConfigMaps, Namespaces and custom resources (CRDs and their objects), what a
// multi-cluster controller of ConfigMaps and custom resources watches. Their watches and
// lists (the kube-apiserver's own informers, mostly) are served from etcd instead. Measured
// on one idle kube-apiserver: 0.31% of a core instead of 0.55%, as each watch cache runs
// timers of its own.
var slimUncached = []string{
	"pods", "nodes", "services", "endpoints", "secrets", "serviceaccounts", "persistentvolumes",
	"persistentvolumeclaims", "replicationcontrollers", "limitranges", "resourcequotas", "podtemplates", "events",
	"roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io", "clusterroles.rbac.authorization.k8s.io",
	"clusterrolebindings.rbac.authorization.k8s.io", "leases.coordination.k8s.io", "apiservices.apiregistration.k8s.io",
	"ingresses.networking.k8s.io", "ingressclasses.networking.k8s.io", "networkpolicies.networking.k8s.io",
	"servicecidrs.networking.k8s.io", "ipaddresses.networking.k8s.io", "endpointslices.discovery.k8s.io",
	"events.events.k8s.io",
}

// slimAPIServerArgs are the flags of a slim kube-apiserver of a Shared fleet: the same secure
// serving, client-certificate authentication and RBAC as envtest's, its data under its own
// prefix of the shared etcd, and less of everything a cluster without nodes does not need:
//   - only slimAPIGroups (--runtime-config), and the watch cache only for what a controller
//     of ConfigMaps and custom resources watches (slimUncached);
//   - no garbage collector (--enable-garbage-collector=false; no kube-controller-manager runs);
//   - no priority and fairness (its configuration objects and their controller), a small
//     max-in-flight limit instead;
//   - no profiling endpoints, no endpoint reconciler (one kube-apiserver per cluster);
//   - no periodic etcd object counts or database size polls (every member would poll the one
//     etcd every few seconds);
//   - no API server identity Leases (a write every 10 s per member) and hence no mixed-version
//     proxy, which depends on them.
func slimAPIServerArgs(name string, port int, etcdURL string, certs *sharedCerts, certDir string) []string {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return []string{
		"--etcd-servers=" + etcdURL,
		"--etcd-prefix=/" + name,
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--cert-dir=" + certDir,
		"--tls-cert-file=" + certs.ServingCert,
		"--tls-private-key-file=" + certs.ServingKey,
		"--client-ca-file=" + certs.CA,
		"--service-account-issuer=https://" + addr + "/",
		"--service-account-key-file=" + certs.SAPub,
		"--service-account-signing-key-file=" + certs.SAKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		"--runtime-config=api/all=false," + strings.Join(slimAPIGroups, "=true,") + "=true",
		"--watch-cache-sizes=" + strings.Join(slimUncached, "#0,") + "#0",
		"--disable-admission-plugins=" + strings.Join(slimDisabledAdmission, ","),
		"--enable-garbage-collector=false",
		"--enable-priority-and-fairness=false",
		"--max-requests-inflight=40",
		"--max-mutating-requests-inflight=20",
		"--profiling=false",
		"--endpoint-reconciler-type=none",
		"--etcd-count-metric-poll-period=0",
		"--etcd-db-metric-poll-interval=0",
		"--feature-gates=APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false",
	}
}
