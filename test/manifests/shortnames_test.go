package manifests

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"
)

// builtinShortNames are the short names of the kinds Kubernetes serves itself, from `kubectl
// api-resources` against kube-apiserver v1.36 (the NAME and SHORTNAMES columns of every group
// that is not a CRD's), with those of kinds since removed (psp) that older clusters still serve.
// TestBuiltinShortNamesAreComplete keeps the list current as the test binaries are upgraded.
var builtinShortNames = map[string]string{
	"cs":     "componentstatuses",
	"cm":     "configmaps",
	"ep":     "endpoints",
	"ev":     "events",
	"limits": "limitranges",
	"ns":     "namespaces",
	"no":     "nodes",
	"pvc":    "persistentvolumeclaims",
	"pv":     "persistentvolumes",
	"po":     "pods",
	"rc":     "replicationcontrollers",
	"quota":  "resourcequotas",
	"sa":     "serviceaccounts",
	"svc":    "services",
	"crd":    "customresourcedefinitions",
	"crds":   "customresourcedefinitions",
	"ds":     "daemonsets",
	"deploy": "deployments",
	"rs":     "replicasets",
	"sts":    "statefulsets",
	"hpa":    "horizontalpodautoscalers",
	"cj":     "cronjobs",
	"csr":    "certificatesigningrequests",
	"ing":    "ingresses",
	"ip":     "ipaddresses",
	"netpol": "networkpolicies",
	"pdb":    "poddisruptionbudgets",
	"pc":     "priorityclasses",
	"psp":    "podsecuritypolicies",
	"sc":     "storageclasses",
	"vac":    "volumeattributesclasses",
}

// TestCRDShortNamesAreNotBuiltin: no short name of our CRDs is one a built-in kind uses, or
// `kubectl get` of it would list the built-in kind (as `kubectl get cs` lists
// ComponentStatuses).
func TestCRDShortNamesAreNotBuiltin(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(configDir, "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	seen := map[string]string{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, short := range crd.Spec.Names.ShortNames {
			if kind, ok := builtinShortNames[short]; ok {
				t.Errorf("%s: short name %q is the built-in %s's", crd.Name, short, kind)
			}
			if other, ok := seen[short]; ok {
				t.Errorf("%s: short name %q is also %s's", crd.Name, short, other)
			}
			seen[short] = crd.Name
		}
	}
	for crd, want := range map[string]string{
		"clustersets.hub.configbundle.dev":        "clset",
		"clustersetbindings.hub.configbundle.dev": "clsb",
	} {
		if seen[want] != crd {
			t.Errorf("%s: want the short name %q", crd, want)
		}
	}
}

// TestBuiltinShortNamesAreComplete: every short name a real API server serves for its built-in
// kinds (those of no CRD) is in builtinShortNames.
func TestBuiltinShortNamesAreComplete(t *testing.T) {
	cp := controlPlane(t, "dry")
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := adminClient(t, cp).List(context.Background(), &crds); err != nil {
		t.Fatal(err)
	}
	ofCRD := map[string]bool{} // group/resource
	for _, crd := range crds.Items {
		ofCRD[crd.Spec.Group+"/"+crd.Spec.Names.Plural] = true
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, list := range lists {
		group, _, _ := strings.Cut(list.GroupVersion, "/")
		if !strings.Contains(list.GroupVersion, "/") {
			group = "" // the core group: "v1"
		}
		for _, r := range list.APIResources {
			if ofCRD[group+"/"+r.Name] {
				continue
			}
			for _, short := range r.ShortNames {
				if _, ok := builtinShortNames[short]; !ok {
					missing = append(missing, short+" ("+list.GroupVersion+" "+r.Name+")")
				}
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("builtinShortNames lacks short names the API server serves: %s", strings.Join(slices.Compact(missing), ", "))
	}
}
