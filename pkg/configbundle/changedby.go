package configbundle

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
)

// changedByUnknown is what ChangedBy says when no managedFields entry tells who made a change.
const changedByUnknown = "unknown"

// ChangedBy names who made the drift fields (as DriftFields names them) of a ConfigMap whose
// managedFields are entries: "MANAGER OPERATION TIME" for each entry of another manager than hub
// that owns one of the fields, oldest first, separated by ", ". A field nobody owns any more (a
// data key removed, a label removed) is named by the entries written after hub's last write.
// "deleted" for a deleted ConfigMap, "unknown" when no entry tells.
func ChangedBy(entries []metav1.ManagedFieldsEntry, fields []string, hub string) string {
	if slices.Equal(fields, []string{DriftDeleted}) {
		return configbundlev1alpha1.ChangedByDeleted
	}
	var owners []metav1.ManagedFieldsEntry
	var hubLast time.Time
	for _, e := range entries {
		if e.Manager == hub {
			if e.Time != nil && e.Time.After(hubLast) {
				hubLast = e.Time.Time
			}
			continue
		}
		if e.Subresource == "" && ownsAny(e.FieldsV1, fields) {
			owners = append(owners, e)
		}
	}
	if len(owners) == 0 {
		for _, e := range entries {
			if e.Manager != hub && e.Subresource == "" && e.Time != nil && !e.Time.Time.Before(hubLast) {
				owners = append(owners, e)
			}
		}
	}
	if len(owners) == 0 {
		return changedByUnknown
	}
	slices.SortStableFunc(owners, func(a, b metav1.ManagedFieldsEntry) int {
		return cmp.Or(entryTime(a).Compare(entryTime(b)), cmp.Compare(a.Manager, b.Manager))
	})
	names := make([]string, 0, len(owners))
	for _, e := range owners {
		name := e.Manager + " " + string(e.Operation)
		if e.Time != nil {
			name += " " + e.Time.UTC().Format(time.RFC3339)
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

func entryTime(e metav1.ManagedFieldsEntry) time.Time {
	if e.Time == nil {
		return time.Time{}
	}
	return e.Time.Time
}

// ownsAny reports whether a managedFields entry's fields (FieldsV1) hold one of the drift fields.
func ownsAny(fieldsV1 *metav1.FieldsV1, fields []string) bool {
	if fieldsV1 == nil {
		return false
	}
	var set map[string]any
	if json.Unmarshal(fieldsV1.GetRawBytes(), &set) != nil {
		return false
	}
	return slices.ContainsFunc(fields, func(f string) bool { return has(set, fieldPath(f)...) })
}

// fieldPath is the FieldsV1 path of a drift field: f:data then f:KEY for a data key, f:metadata
// then f:labels for labels, and so on.
func fieldPath(field string) []string {
	if rest, ok := strings.CutPrefix(field, "data."); ok {
		key := rest[:strings.LastIndexByte(rest, ' ')]
		return []string{"f:data", "f:" + key}
	}
	switch field {
	case DriftLabels, DriftAnnotations, DriftOwnerReferences:
		return []string{"f:metadata", "f:" + field}
	case DriftBinaryData, DriftImmutable:
		return []string{"f:" + field}
	}
	return nil
}

// has reports whether set holds path, a path of FieldsV1 keys.
func has(set map[string]any, path ...string) bool {
	if len(path) == 0 {
		return false
	}
	for i, p := range path {
		v, ok := set[p]
		if !ok {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if set, ok = v.(map[string]any); !ok {
			return false
		}
	}
	return false
}
