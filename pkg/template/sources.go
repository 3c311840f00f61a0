package template

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
)

// Source is what resolution reads of one source object: its data, and the keys of its
// binaryData, which a bundle cannot hold.
type Source struct {
	Data       map[string]string
	BinaryKeys []string
}

// SourceError is why a FleetBundle's sources cannot be resolved: Reason is the reason of its
// Ready condition (SourceNotFound, SourceInvalid, or InvalidTemplate for a key defined twice).
type SourceError struct {
	Reason  string
	Message string
}

func (e *SourceError) Error() string { return e.Message }

// ResolveSources merges the data of the sources a FleetBundle's spec.dataFrom names, in order,
// as its definition's Sources; read returns a source, or nil if the hub cannot read it (it is
// missing or not labelled SourceLabel). A key two entries define is an error unless the later
// entry sets a prefix (its value wins); a key an entry and spec.template.spec.data both define is
// an error. The sources and the template's data together must fit in a bundle.
func ResolveSources(fb *hubv1alpha1.FleetBundle, read func(hubv1alpha1.DataFromSource) *Source) (map[string]string, error) {
	if len(fb.Spec.DataFrom) == 0 {
		return nil, nil
	}
	out, from := map[string]string{}, map[string]int{}
	secret := fb.Spec.Template.Spec.TargetKind() == configbundlev1alpha1.TargetSecret
	for i, entry := range fb.Spec.DataFrom {
		src := read(entry)
		if src == nil {
			return nil, notFound(fb, i, entry)
		}
		taken, err := take(i, entry, src, secret)
		if err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(taken)) {
			if j, ok := from[k]; ok && entry.Prefix == "" {
				return nil, &SourceError{Reason: hubv1alpha1.InvalidTemplateReason, Message: fmt.Sprintf(
					"spec.dataFrom[%d] (%s) and spec.dataFrom[%d] (%s) both define the key %q: set a prefix on the later one", j, describe(fb.Spec.DataFrom[j]), i, describe(entry), k)}
			}
			out[k], from[k] = taken[k], i
		}
	}
	for _, k := range slices.Sorted(maps.Keys(fb.Spec.Template.Spec.Data)) {
		if i, ok := from[k]; ok {
			return nil, &SourceError{Reason: hubv1alpha1.InvalidTemplateReason, Message: fmt.Sprintf(
				"spec.dataFrom[%d] (%s) and spec.template.spec.data both define the key %q: set a prefix on the source, or remove the key from the template", i, describe(fb.Spec.DataFrom[i]), k)}
		}
	}
	return out, checkSize(fb, out)
}

// take returns the keys an entry takes from its source, with its prefix.
func take(i int, entry hubv1alpha1.DataFromSource, src *Source, secret bool) (map[string]string, error) {
	invalid := func(format string, args ...any) error {
		return &SourceError{Reason: hubv1alpha1.SourceInvalidReason, Message: fmt.Sprintf("spec.dataFrom[%d] (%s): ", i, describe(entry)) + fmt.Sprintf(format, args...)}
	}
	if entry.SecretRef != nil && !secret {
		return nil, invalid("a Secret's data never lands in a ConfigMap")
	}
	if entry.SecretRef == nil && secret {
		return nil, invalid("a FleetBundle that places a Secret takes its data only from secretRef sources")
	}
	keys := entry.Keys
	if keys == nil {
		if len(src.BinaryKeys) > 0 {
			return nil, invalid("it has binaryData (%s), which a bundle cannot hold: list the keys to take in keys", fleetbundle.ListNames(src.BinaryKeys))
		}
		keys = slices.Collect(maps.Keys(src.Data))
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		v, ok := src.Data[k]
		switch {
		case slices.Contains(src.BinaryKeys, k):
			return nil, invalid("the key %q is binaryData, which a bundle cannot hold", k)
		case !ok:
			return nil, invalid("the key %q listed in keys is missing from the %s", k, kindOf(entry))
		}
		key := entry.Prefix + k
		if key == "message" && !secret {
			return nil, invalid("the key \"message\" is the bundle's spec.message: set a prefix")
		}
		if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
			return nil, invalid("the key %q is not a valid %s key: %s", key, kindOf(entry), strings.Join(errs, "; "))
		}
		out[key] = v
	}
	return out, nil
}

// checkSize refuses sources that, with the template's message and data, hold more than a bundle:
// too many keys, a value too long, or too many bytes in all (raw, or JSON-escaped as etcd stores
// them).
func checkSize(fb *hubv1alpha1.FleetBundle, sources map[string]string) error {
	spec := &fb.Spec.Template.Spec
	invalid := func(format string, args ...any) error {
		return &SourceError{Reason: hubv1alpha1.SourceInvalidReason, Message: "spec.dataFrom: " + fmt.Sprintf(format, args...)}
	}
	if n := len(sources) + len(spec.Data); n > configbundlev1alpha1.MaxDataKeys {
		return invalid("the sources and the template define %d keys, more than the %d a bundle holds", n, configbundlev1alpha1.MaxDataKeys)
	}
	size, escaped := len(spec.Message), escapedSize(spec.Message)
	for _, v := range spec.Data {
		size, escaped = size+len(v), escaped+escapedSize(string(v))
	}
	for _, k := range slices.Sorted(maps.Keys(sources)) {
		if len(sources[k]) > configbundlev1alpha1.MaxDataValueBytes {
			return invalid("the value of the key %q is %d bytes, more than the %d a bundle's data value holds", k, len(sources[k]), configbundlev1alpha1.MaxDataValueBytes)
		}
		size, escaped = size+len(sources[k]), escaped+escapedSize(sources[k])
	}
	if size > configbundlev1alpha1.MaxMessageBytes || escaped > configbundlev1alpha1.MaxEscapedMessageBytes {
		return invalid("the sources with the template's message and data are %d bytes (%d JSON-escaped), more than the %d (%d) a bundle holds",
			size, escaped, configbundlev1alpha1.MaxMessageBytes, configbundlev1alpha1.MaxEscapedMessageBytes)
	}
	return nil
}

// notFound is the error of a source the hub cannot read.
func notFound(fb *hubv1alpha1.FleetBundle, i int, entry hubv1alpha1.DataFromSource) error {
	kind, name := kindOf(entry), nameOf(entry)
	return &SourceError{Reason: hubv1alpha1.SourceNotFoundReason, Message: fmt.Sprintf(
		"spec.dataFrom[%d]: the hub finds no %s %s/%s labelled %s=true: the hub reads only %ss so labelled; create it, or label it (kubectl label %s -n %s %s %s=true)",
		i, kind, fb.Namespace, name, hubv1alpha1.SourceLabel, kind, lower(kind), fb.Namespace, name, hubv1alpha1.SourceLabel)}
}

func kindOf(entry hubv1alpha1.DataFromSource) string {
	if entry.SecretRef != nil {
		return "Secret"
	}
	return "ConfigMap"
}

func nameOf(entry hubv1alpha1.DataFromSource) string {
	if entry.SecretRef != nil {
		return entry.SecretRef.Name
	}
	if entry.ConfigMapRef != nil {
		return entry.ConfigMapRef.Name
	}
	return ""
}

func lower(kind string) string {
	if kind == "Secret" {
		return "secret"
	}
	return "configmap"
}

// describe names an entry's source: "ConfigMap ca-bundle".
func describe(entry hubv1alpha1.DataFromSource) string { return kindOf(entry) + " " + nameOf(entry) }

// SourcesHash identifies what a definition's sources resolved to: what a FleetBundle's
// spec.dataFromRevision compares.
func SourcesHash(sources map[string]string) string {
	return fleetbundle.Hash(sources)
}

// SecretHash is the SHA-256, in lowercase hex, of what a FleetBundle's secretRef sources
// resolved to: a revision's SourcesHash, and the hash of a placed bundle's spec.hubSource. It
// names the content without holding it.
func SecretHash(sources map[string]string) string {
	raw, err := json.Marshal(sources) // map keys are sorted: the same content, the same bytes
	if err != nil {
		panic(fmt.Sprintf("marshalling for a hash: %v", err)) // a map of strings cannot fail
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// SnapshotName is the name of the hub Secret that keeps what revision n of a FleetBundle's
// secretRef sources held: "<fleetbundle>-<revision>-sources".
func SnapshotName(fleetBundle string, n int64) string {
	return fmt.Sprintf("%s-%d-sources", fleetBundle, n)
}

// PinHash is what a FleetBundle's spec.dataFromRevision.sourcesHash compares with sources, what
// its sources resolve to now: SecretHash with target Secret (secret), SourcesHash otherwise.
func PinHash(secret bool, sources map[string]string) string {
	if secret {
		return SecretHash(sources)
	}
	return SourcesHash(sources)
}
