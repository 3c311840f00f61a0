package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/fleetbundle"
	"configbundle.dev/hub/pkg/placement"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/template"
	"configbundle.dev/hub/pkg/tenancy"
)

// newRenderCommand returns `hub render`: what a FleetBundle places in each member, rendered by
// the hub's own code, without writing anything.
func newRenderCommand() *cobra.Command {
	var (
		f      rolloutFlags
		m      manifestFlags
		member string
	)
	cmd := &cobra.Command{
		Use:   "render (NAME | -f FILE) [flags]",
		Short: "Print the ConfigBundle a FleetBundle places in each selected member, rendered as the hub does; exit 1 if one fails to render",
		Long: `Reads the FleetBundle NAME and the MemberClusters from the hub cluster and prints, for each member
its spec.clusterSelector selects among the members of the ClusterSets bound to its namespace
(sorted by name), the ConfigBundle the hub places there, rendered
from the spec (its templateEngine and overrides, with the member's name and labels) by the code
the hub runs: a YAML document preceded by "# member: NAME", the documents separated by "---".
A member the spec does not render for is printed as "# member: NAME: render failed: ERROR" and
the others still are; the command then exits 1. It writes nothing, anywhere.

A definition that cannot be rendered for any member (InvalidTemplate, an invalid clusterSelector),
or a FleetBundle whose namespace has no ClusterSet bound (NoClusterSetBinding), is said on
stderr, exit 1. A FleetBundle that selects no member prints nothing and says so on
stderr, exit 0.

With --cluster MEMBER it renders for that MemberCluster alone, whether or not the FleetBundle
selects it (say it does not, on the "# member:" line and on stderr): what a member would get once
labelled. A MemberCluster that does not exist is a failure (exit 1).

During a staged rollout, a member not yet updated still holds an older revision: this prints what
the spec (status.updateRevision) renders to.

With -f FILE ("-": stdin) it previews a FleetBundle manifest that is not applied yet, against the
live members: the file holds one FleetBundle (its namespace, else --namespace), decoded strictly,
and the hub's API server validates it as the CRD and the admission policies would, in a dry run
that writes nothing (who may not write FleetBundles gets it checked locally only, and a note on
stderr). A manifest the API server refuses is a failure, exit 1.`,
		Example: `  hub render web -n apps
  hub render web -n apps --cluster eu-1
  hub render web -n apps > rendered.yaml || echo "a member fails to render"
  hub render -f web.yaml`,
		Args: func(_ *cobra.Command, args []string) error { return m.checkArgs(args) },
		RunE: func(cmd *cobra.Command, args []string) error { return runRender(cmd, &f, &m, member, args) },
	}
	f.bind(cmd.Flags())
	cmd.Flags().StringVarP(&m.file, "filename", "f", "", "Preview the FleetBundle manifest in this file (\"-\": stdin), not applied yet, instead of NAME.")
	cmd.Flags().StringVar(&member, "cluster", "", "Render for this MemberCluster alone, selected by the FleetBundle or not.")
	return cmd
}

// runRender runs hub render: of the FleetBundle NAME, or of the manifest of -f.
func runRender(cmd *cobra.Command, f *rolloutFlags, m *manifestFlags, member string, args []string) error {
	key, err := m.key(f, args)
	if err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(member); member != "" && len(errs) > 0 {
		return fmt.Errorf("--cluster %q is not a MemberCluster name: %s", member, strings.Join(errs, "; "))
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	if m.file == "" {
		return render(cmd.Context(), c, key, member, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	fb, err := readManifest(m.file, cmd.InOrStdin(), f.namespace, cmd.Flags().Changed("namespace"))
	if err != nil {
		return failed(err)
	}
	if fb, err = asApplied(cmd.Context(), c, fb, cmd.ErrOrStderr()); err != nil {
		return failed(err)
	}
	return renderFleetBundle(cmd.Context(), c, fb, member, cmd.OutOrStdout(), cmd.ErrOrStderr())
}

// renderTarget is a member to render for, and whether the FleetBundle selects it.
type renderTarget struct {
	member   template.Member
	selected bool
}

// render prints the ConfigBundle the FleetBundle key places in each member it selects (or in
// the member only alone), or the member's render error; a failure if any member fails to render
// or nothing can be rendered. It only reads.
func render(ctx context.Context, c client.Reader, key types.NamespacedName, only string, out, errOut io.Writer) error {
	fb := &hubv1alpha1.FleetBundle{}
	if err := c.Get(ctx, key, fb); err != nil {
		return failed(fleetBundleError(key, err))
	}
	return renderFleetBundle(ctx, c, fb, only, out, errOut)
}

// renderFleetBundle prints the ConfigBundle fb places in each member it selects (or in the
// member only alone), as render does.
func renderFleetBundle(ctx context.Context, c client.Reader, fb *hubv1alpha1.FleetBundle, only string, out, errOut io.Writer) error {
	key := client.ObjectKeyFromObject(fb)
	if err := placesNothing(fb); err != nil {
		return failed(fmt.Errorf("FleetBundle %s: %w", key, err))
	}
	def, err := rollout.ResolveDefinition(ctx, c, fb) // its sources, as the hub reads them
	if se := (*template.SourceError)(nil); errors.As(err, &se) {
		return failed(fmt.Errorf("FleetBundle %s: %s: %w; the hub places, changes and removes nothing in any member until it is fixed", key, se.Reason, err))
	} else if err != nil {
		return failed(err)
	}
	rev := rollout.Revision{Definition: def, Hash: template.Hash(&def)}
	boundary, members, err := readPlacementView(ctx, c, fb)
	if err != nil {
		return failed(err)
	}
	if !boundary.HasBound() {
		return failed(fmt.Errorf("FleetBundle %s: %s: %s", key, hubv1alpha1.NoClusterSetBindingReason, boundary.Unbound()))
	}
	targets, err := renderTargets(members, fb, boundary, only)
	if err != nil {
		return failed(err)
	}
	if len(targets) == 0 {
		fmt.Fprintf(errOut, "FleetBundle %s selects no MemberCluster (spec.clusterSelector, among the members of the ClusterSets bound to namespace %s): nothing to render\n", key, key.Namespace)
		return nil
	}
	var broken []string
	for i, t := range targets {
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		if !t.selected {
			fmt.Fprintf(errOut, "MemberCluster %s is not selected by FleetBundle %s (spec.clusterSelector, or not in a ClusterSet bound to namespace %s): the hub places nothing there; rendered as if it were\n", t.member.Name, key, key.Namespace)
		}
		if err := printRendered(out, fb, rev, t); err != nil {
			broken = append(broken, t.member.Name)
		}
	}
	if len(broken) > 0 {
		return failed(fmt.Errorf("FleetBundle %s: %d of %d members failed to render: %s", key, len(broken), len(targets), strings.Join(broken, ", ")))
	}
	return nil
}

// placesNothing returns why the hub places nothing of fb in any member, as its Ready condition
// says (InvalidSelector, InvalidTemplate, NameTooLong), or nil.
func placesNothing(fb *hubv1alpha1.FleetBundle) error {
	if _, err := fleetbundle.Selects(fb.Spec.ClusterSelector, nil); err != nil {
		return fmt.Errorf("%s: %w; the hub places nothing until it is fixed", hubv1alpha1.InvalidSelectorReason, err)
	}
	d := template.DefinitionOf(fb)
	if err := d.Check(); err != nil {
		return fmt.Errorf("%s: %w; the hub places, changes and removes nothing in any member until it is fixed", hubv1alpha1.InvalidTemplateReason, err)
	}
	if !fleetbundle.LabelFits(client.ObjectKeyFromObject(fb)) {
		return fmt.Errorf("%s: %q is longer than the %d characters of a label value; the hub places nothing", hubv1alpha1.NameTooLongReason,
			fleetbundle.LabelValue(client.ObjectKeyFromObject(fb)), hubv1alpha1.MaxFleetBundleLabelValue)
	}
	return nil
}

// renderTargets returns the members fb selects within its boundary (the ClusterSets bound to its
// namespace), sorted by name; with only, that MemberCluster alone, selected or not.
func renderTargets(members []hubv1alpha1.MemberCluster, fb *hubv1alpha1.FleetBundle, boundary tenancy.Boundary, only string) ([]renderTarget, error) {
	if only != "" {
		i := slices.IndexFunc(members, func(mc hubv1alpha1.MemberCluster) bool { return mc.Name == only })
		if i < 0 {
			return nil, fmt.Errorf("no MemberCluster %s (kubectl get memberclusters lists them; a tenant sees those of its ClusterSetBindings)", only)
		}
		members = members[i : i+1]
	}
	var targets []renderTarget
	for _, mc := range members {
		selected := boundary.Selects(fb, mc.Labels)
		if selected || only != "" {
			targets = append(targets, renderTarget{member: template.Member{Name: mc.Name, Labels: mc.Labels}, selected: selected})
		}
	}
	slices.SortFunc(targets, func(a, b renderTarget) int { return strings.Compare(a.member.Name, b.member.Name) })
	return targets, nil
}

// renderedBundle is how a rendered ConfigBundle is printed: a manifest of what the hub writes,
// without the empty status and creationTimestamp of a Go object.
type renderedBundle struct {
	APIVersion string                                `json:"apiVersion"`
	Kind       string                                `json:"kind"`
	Metadata   renderedMetadata                      `json:"metadata"`
	Spec       configbundlev1alpha1.ConfigBundleSpec `json:"spec"`
}

type renderedMetadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// printRendered prints one member's document: "# member: NAME" and the ConfigBundle the hub
// places there, or "# member: NAME: render failed: ERROR", returning the render error.
func printRendered(out io.Writer, fb *hubv1alpha1.FleetBundle, rev rollout.Revision, t renderTarget) error {
	b, err := placement.DesiredOf(fb, rev, t.member)
	if err != nil {
		fmt.Fprintf(out, "# member: %s: render failed: %s\n", t.member.Name, comment(err.Error()))
		return err
	}
	raw, err := yaml.Marshal(renderedBundle{
		APIVersion: configbundlev1alpha1.GroupVersion.String(),
		Kind:       "ConfigBundle",
		Metadata:   renderedMetadata{Name: b.Name, Namespace: b.Namespace, Labels: b.Labels, Annotations: b.Annotations},
		Spec:       b.Spec,
	})
	if err != nil {
		err = fmt.Errorf("encoding the ConfigBundle as YAML: %w", err)
		fmt.Fprintf(out, "# member: %s: render failed: %s\n", t.member.Name, comment(err.Error()))
		return err
	}
	line := "# member: " + t.member.Name
	if !t.selected {
		line += " (not selected by spec.clusterSelector within the bound ClusterSets: the hub places nothing there)"
	}
	fmt.Fprintf(out, "%s\n%s", line, raw)
	if keys := secretKeys(rev.Definition.SecretSources); keys != "" {
		fmt.Fprintf(out, "# Secret %s/%s: %s (the SHA-256 of each value; values are never shown)\n", b.Namespace, b.Name, keys)
	}
	return nil
}

// secretKeys names the keys of the Secret of a target Secret definition, each with the SHA-256
// of its value: "token=sha256:HEX"; "" for none.
func secretKeys(sources map[string]string) string {
	keys := make([]string, 0, len(sources))
	for _, k := range slices.Sorted(maps.Keys(sources)) {
		sum := sha256.Sum256([]byte(sources[k]))
		keys = append(keys, k+"=sha256:"+hex.EncodeToString(sum[:]))
	}
	return strings.Join(keys, ", ")
}

// comment keeps a multi-line text within a YAML comment.
func comment(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n# ")
}
