package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// manifestFlags are the flags of hub render and hub diff that preview a FleetBundle manifest not
// applied yet: -f FILE instead of NAME.
type manifestFlags struct {
	file string
}

// checkArgs accepts NAME, or none with -f.
func (m *manifestFlags) checkArgs(args []string) error {
	if m.file == "" {
		return exactlyOneFleetBundle(nil, args)
	}
	if len(args) > 0 {
		return fmt.Errorf("-f %s names the FleetBundle: want no NAME, got %s", m.file, strings.Join(args, " "))
	}
	return nil
}

// key returns the FleetBundle NAME names in --namespace, as rolloutFlags.key; with -f, only
// --namespace is checked (the manifest names the FleetBundle) and the key has no name.
func (m *manifestFlags) key(f *rolloutFlags, args []string) (types.NamespacedName, error) {
	if m.file == "" {
		return f.key(args[0])
	}
	if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("--namespace %q is not a namespace name: %s", f.namespace, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: f.namespace}, nil
}

// readManifest reads the FleetBundle manifest of -f (a file, or "-" for stdin): one YAML or
// JSON document of kind FleetBundle, decoded strictly (an unknown or misspelt field is an
// error, as kubectl apply's server-side field validation says). Its namespace is its own, else
// namespace (-n); a namespace given with -n that differs from the manifest's is an error.
func readManifest(path string, stdin io.Reader, namespace string, namespaceSet bool) (*hubv1alpha1.FleetBundle, error) {
	raw, err := readFileOrStdin(path, stdin)
	if err != nil {
		return nil, err
	}
	doc, err := oneDocument(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	fb := &hubv1alpha1.FleetBundle{}
	if err := yaml.UnmarshalStrict(doc, fb); err != nil {
		return nil, fmt.Errorf("%s: not a valid FleetBundle: %w", path, err)
	}
	if gv := hubv1alpha1.GroupVersion.String(); fb.APIVersion != gv || fb.Kind != "FleetBundle" {
		return nil, fmt.Errorf("%s: want apiVersion %s, kind FleetBundle; got apiVersion %q, kind %q", path, gv, fb.APIVersion, fb.Kind)
	}
	if errs := validation.IsDNS1123Subdomain(fb.Name); len(errs) > 0 {
		return nil, fmt.Errorf("%s: metadata.name %q is not a FleetBundle name: %s", path, fb.Name, strings.Join(errs, "; "))
	}
	switch {
	case fb.Namespace == "":
		fb.Namespace = namespace
	case namespaceSet && fb.Namespace != namespace:
		return nil, fmt.Errorf("%s: the manifest's namespace %q is not --namespace %q", path, fb.Namespace, namespace)
	}
	if errs := validation.IsDNS1123Label(fb.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("%s: namespace %q is not a namespace name: %s", path, fb.Namespace, strings.Join(errs, "; "))
	}
	// What the API server sets or keeps, a manifest does not bring.
	fb.ResourceVersion, fb.UID, fb.Generation, fb.Status = "", "", 0, hubv1alpha1.FleetBundleStatus{}
	return fb, nil
}

// readFileOrStdin reads path, or stdin for "-".
func readFileOrStdin(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		raw, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading the manifest from stdin: %w", err)
		}
		return raw, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest: %w", err)
	}
	return raw, nil
}

// oneDocument returns the only non-empty YAML (or JSON) document of raw.
func oneDocument(raw []byte) ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading YAML: %w", err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
	switch len(docs) {
	case 1:
		return docs[0], nil
	case 0:
		return nil, errors.New("no FleetBundle in it")
	default:
		return nil, fmt.Errorf("want one FleetBundle, got %d documents", len(docs))
	}
}

// stripComments drops the YAML comment lines of doc.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// asApplied returns fb as the hub would see it once applied: with the uid and status of the
// live FleetBundle of its name if there is one (its placed bundles and revisions are that one's),
// else as new. It also has the hub's API server validate fb as the CRD and the admission
// policies would, writing nothing (a dry run of its create, or of its update over the live
// one); a refusal is the error. Who may not write FleetBundles gets fb checked here only (the
// selector, the template, the name's length), and a note on errOut.
func asApplied(ctx context.Context, c client.Client, fb *hubv1alpha1.FleetBundle, errOut io.Writer) (*hubv1alpha1.FleetBundle, error) {
	key := client.ObjectKeyFromObject(fb)
	live := &hubv1alpha1.FleetBundle{}
	err := c.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, fmt.Errorf("reading FleetBundle %s: %w", key, err)
	}
	probe := fb.DeepCopy()
	if live != nil {
		probe.ResourceVersion = live.ResourceVersion
		err = c.Update(ctx, probe, client.DryRunAll)
	} else {
		err = c.Create(ctx, probe, client.DryRunAll)
	}
	switch {
	case apierrors.IsForbidden(err):
		fmt.Fprintf(errOut, "FleetBundle %s: not validated by the hub's API server (you may not write FleetBundles in namespace %s): its selector and template are checked here only\n", key, key.Namespace)
	case err != nil:
		return nil, fmt.Errorf("FleetBundle %s: the hub's API server refuses it: %w", key, err)
	}
	if err := placesNothing(fb); err != nil {
		return nil, fmt.Errorf("FleetBundle %s: %w", key, err)
	}
	out := fb.DeepCopy()
	if live != nil {
		out.UID, out.Status = live.UID, live.Status
	}
	return out, nil
}
