// Package config holds the deployable manifests (kustomize bases under this directory) and embeds
// the generated CRDs, so that the hub can install them itself and tests can load them.
package config

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

//go:embed crd/bases/*.yaml rbac/member/role.yaml samples/configbundle_*.yaml samples/fleetbundle_web.yaml
//go:embed samples/clusterset_global.yaml default/clusterset_bind_policy.yaml default/approval_policy.yaml
var files embed.FS

// MemberCRDs returns the CRDs a member cluster needs: the ConfigBundle CRD.
func MemberCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load[apiextensionsv1.CustomResourceDefinition]("crd/bases/configbundle.dev_configbundles.yaml")
}

// HubCRDs returns the CRDs of the hub cluster: MemberCluster, Fleet, FleetBundle, ClusterSet and
// ClusterSetBinding.
func HubCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load[apiextensionsv1.CustomResourceDefinition]("crd/bases/hub.configbundle.dev_memberclusters.yaml",
		"crd/bases/hub.configbundle.dev_fleets.yaml", "crd/bases/hub.configbundle.dev_fleetbundles.yaml",
		"crd/bases/hub.configbundle.dev_clustersets.yaml", "crd/bases/hub.configbundle.dev_clustersetbindings.yaml")
}

// ClusterSetBindPolicy returns the ValidatingAdmissionPolicy that refuses a ClusterSetBinding
// whose author may not create clustersets/bind of its set, and its binding
// (config/default/clusterset_bind_policy.yaml).
func ClusterSetBindPolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	return policy("default/clusterset_bind_policy.yaml")
}

// ApprovalPolicy returns the ValidatingAdmissionPolicy that makes the approvals of a FleetBundle's
// rollout unforgeable, and its binding (config/default/approval_policy.yaml).
func ApprovalPolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	return policy("default/approval_policy.yaml")
}

// policy decodes the embedded file of a ValidatingAdmissionPolicy and its binding.
func policy(path string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	raw, err := fs.ReadFile(files, path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading embedded %s: %w", path, err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("embedded %s: want 2 documents, got %d", path, len(docs))
	}
	policy, binding := &admissionregistrationv1.ValidatingAdmissionPolicy{}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), policy); err != nil {
		return nil, nil, fmt.Errorf("decoding the ValidatingAdmissionPolicy of embedded %s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		return nil, nil, fmt.Errorf("decoding the ValidatingAdmissionPolicyBinding of embedded %s: %w", path, err)
	}
	return policy, binding, nil
}

// SampleClusterSet returns the example ClusterSet "global" and its binding into the namespace
// default (config/samples/clusterset_global.yaml), what a newcomer's first FleetBundle needs.
func SampleClusterSet() (*hubv1alpha1.ClusterSet, *hubv1alpha1.ClusterSetBinding, error) {
	raw, err := fs.ReadFile(files, "samples/clusterset_global.yaml")
	if err != nil {
		return nil, nil, fmt.Errorf("reading embedded clusterset_global.yaml: %w", err)
	}
	docs := strings.Split(string(raw), "\n---\n")
	if len(docs) != 2 {
		return nil, nil, fmt.Errorf("embedded clusterset_global.yaml: want 2 documents, got %d", len(docs))
	}
	set, binding := &hubv1alpha1.ClusterSet{}, &hubv1alpha1.ClusterSetBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), set); err != nil {
		return nil, nil, fmt.Errorf("decoding the embedded ClusterSet: %w", err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), binding); err != nil {
		return nil, nil, fmt.Errorf("decoding the embedded ClusterSetBinding: %w", err)
	}
	return set, binding, nil
}

// MemberClusterRole returns the ClusterRole the hub's credential needs in a member cluster
// (generated from the reconciler's and the provider's RBAC markers).
func MemberClusterRole() (*rbacv1.ClusterRole, error) {
	roles, err := load[rbacv1.ClusterRole]("rbac/member/role.yaml")
	if err != nil {
		return nil, err
	}
	return roles[0], nil
}

// SampleBundles returns the example ConfigBundles of config/samples (`kubectl apply -k
// config/samples`), without a namespace, in the order of their file names.
func SampleBundles() ([]*configbundlev1alpha1.ConfigBundle, error) {
	paths, err := fs.Glob(files, "samples/configbundle_*.yaml")
	if err != nil {
		return nil, err
	}
	return load[configbundlev1alpha1.ConfigBundle](paths...)
}

// SampleFleetBundle returns the example FleetBundle of config/samples/fleetbundle_web.yaml, for
// the hub (`kubectl apply -f`), with its namespace.
func SampleFleetBundle() (*hubv1alpha1.FleetBundle, error) {
	fbs, err := load[hubv1alpha1.FleetBundle]("samples/fleetbundle_web.yaml")
	if err != nil {
		return nil, err
	}
	return fbs[0], nil
}

// load decodes embedded YAML files, one object of type T each, strictly.
func load[T any](paths ...string) ([]*T, error) {
	objs := make([]*T, 0, len(paths))
	for _, p := range paths {
		raw, err := fs.ReadFile(files, p)
		if err != nil {
			return nil, fmt.Errorf("reading embedded %s: %w", p, err)
		}
		obj := new(T)
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			return nil, fmt.Errorf("decoding embedded %s: %w", p, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}
