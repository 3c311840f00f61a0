package registration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// maxNameLength bounds the names Register derives from a member name: a DNS-1123 label's
// length, valid for every kind and readable in `kubectl get`.
const maxNameLength = validation.DNS1123LabelMaxLength

// hashLength is the length of the hash that ends a derived name too long to hold the member
// name whole.
const hashLength = 8

// ServiceAccountName is the name of the hub's ServiceAccount, in the member, for the registration
// name: "configbundle-hub-<name>", shortened to at most 63 characters with a hash of name if need
// be. Each registration has its own, so that unregistering one never revokes another.
func ServiceAccountName(name string) string {
	return derivedName(ServiceAccountPrefix, name, maxNameLength)
}

// ClusterRoleBindingName is the name of the ClusterRoleBinding, in the member, that grants the
// registration name's ServiceAccount the ClusterRole RBACName: "configbundle-hub-member-<name>",
// shortened like ServiceAccountName. It never equals RBACName, the binding of registrations made
// before there was one per name.
func ClusterRoleBindingName(name string) string {
	return derivedName(RBACName+"-", name, maxNameLength)
}

// RenewalRoleName is the name of the Role and RoleBinding, in the member namespace, that let the
// registration name's ServiceAccount request tokens for itself (the hub renews its credential):
// ServiceAccountName(name).
func RenewalRoleName(name string) string {
	return ServiceAccountName(name)
}

// tokenSecretGenerateName is the generateName of the registration name's token Secrets in the
// member: the API server appends five characters.
func tokenSecretGenerateName(name string) string {
	return derivedName(ServiceAccountPrefix, name, maxNameLength-6) + "-"
}

// derivedName is prefix+name if it fits in max characters, else prefix, as much of name as fits
// (without a trailing '-' or '.') and "-" and the first hashLength hex digits of name's SHA-256,
// so that two long names sharing a beginning still differ. Valid as a DNS-1123 subdomain whenever
// name is one and prefix is one ending in '-'.
func derivedName(prefix, name string, max int) string {
	if len(prefix)+len(name) <= max {
		return prefix + name
	}
	sum := sha256.Sum256([]byte(name))
	keep := strings.TrimRight(name[:max-len(prefix)-1-hashLength], "-.")
	return prefix + keep + "-" + hex.EncodeToString(sum[:])[:hashLength]
}

// ParseLabels parses `--label` arguments, each KEY=VALUE (VALUE may be empty), into a map,
// validating keys and values as Kubernetes labels. A key given twice is an error, and so is
// ManagedByLabel, which the hub sets. No arguments give nil: no labels to manage.
func ParseLabels(args []string) (map[string]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	labels := make(map[string]string, len(args))
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		if !ok {
			return nil, fmt.Errorf("invalid label %q: want KEY=VALUE", arg)
		}
		if _, dup := labels[k]; dup {
			return nil, fmt.Errorf("invalid labels: %q is given twice", k)
		}
		labels[k] = v
	}
	if err := validateLabels(labels); err != nil {
		return nil, err
	}
	return labels, nil
}

// validateLabels checks labels as the API server would, and that ManagedByLabel is not among
// them.
func validateLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k == hubv1alpha1.ManagedByLabel {
			return fmt.Errorf("invalid label %q: reserved, the hub sets it", k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("invalid label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Errorf("invalid value %q of label %q: %s", labels[k], k, strings.Join(errs, "; "))
		}
	}
	return nil
}
