package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// object is one rendered Kubernetes object, as decoded from JSON.
type object = map[string]any

// sources are the rendered kustomizations.
type sources struct {
	base       []object // config/default
	sharded    []object // config/sharded
	prometheus []object // config/prometheus; nil when it does not exist
}

func load(configDir string) (*sources, error) {
	var src sources
	var err error
	if src.base, err = render(filepath.Join(configDir, "default")); err != nil {
		return nil, err
	}
	if src.sharded, err = render(filepath.Join(configDir, "sharded")); err != nil {
		return nil, err
	}
	prom := filepath.Join(configDir, "prometheus")
	if _, statErr := os.Stat(filepath.Join(prom, "kustomization.yaml")); statErr == nil {
		if src.prometheus, err = render(prom); err != nil {
			return nil, err
		}
	}
	return &src, nil
}

// render builds the kustomization in dir as `kubectl kustomize` does, and returns its objects
// sorted by kind, namespace and name.
func render(dir string) ([]object, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	objs := make([]object, 0, resMap.Size())
	for _, r := range resMap.Resources() {
		raw, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		var obj object
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("kustomize build %s: %s: %w", dir, r.CurId(), err)
		}
		objs = append(objs, obj)
	}
	slices.SortFunc(objs, func(a, b object) int { return strings.Compare(id(a), id(b)) })
	return objs, nil
}

// Accessors of an object's fields; missing fields read as zero values.

func str(o object, path ...string) string { s, _ := get(o, path...).(string); return s }
func kind(o object) string                { return str(o, "kind") }
func name(o object) string                { return str(o, "metadata", "name") }
func id(o object) string {
	return kind(o) + "/" + str(o, "metadata", "namespace") + "/" + name(o)
}

// get reads the field at path (apimachinery's unstructured accessor: nil if missing).
func get(o object, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(o, path...)
	return v
}

// child returns the map at path, creating it when missing.
func child(o object, path ...string) object {
	cur := o
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = object{}
			cur[k] = next
		}
		cur = next
	}
	return cur
}

// deepCopy copies an object (apimachinery's deep copy of JSON values).
func deepCopy(o object) object { return runtime.DeepCopyJSON(o) }

// only returns the one object of objs of kind k, failing when there is not exactly one.
func only(objs []object, k, where string) (object, error) {
	var found []object
	for _, o := range objs {
		if kind(o) == k {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%s renders %d objects of kind %s, want exactly one", where, len(found), k)
	}
	return found[0], nil
}

// byID maps the objects of objs by their id.
func byID(objs []object) map[string]object {
	m := make(map[string]object, len(objs))
	for _, o := range objs {
		m[id(o)] = o
	}
	return m
}
