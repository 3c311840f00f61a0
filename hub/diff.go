package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/kubeconfig"
	"configbundle.dev/hub/pkg/placement"
	"configbundle.dev/hub/pkg/rollout"
	"configbundle.dev/hub/pkg/template"
	"configbundle.dev/hub/pkg/version"
)

// diffUserAgent names hub diff in the members' audit logs.
var diffUserAgent = version.UserAgent("") + " diff"

// diffFlags are the flags of hub diff.
type diffFlags struct {
	rolloutFlags
	manifestFlags
	member, bundle, secretKey string
	memberKubeconfig          string
	timeout                   time.Duration
}

// newDiffCommand returns `hub diff`: what the hub would change in the members' ConfigMaps, as a
// unified diff, without writing anything.
func newDiffCommand() *cobra.Command {
	var f diffFlags
	cmd := &cobra.Command{
		Use:   "diff (NAME | -f FILE) [flags]",
		Short: "Show what the hub would change in the members' ConfigMaps, as a unified diff; exit 1 if anything differs",
		Long: `Compares, for the FleetBundle NAME, the live ConfigMap in each member with the ConfigMap the hub
would write there now, and prints a unified diff of the YAML of what the hub keeps (data,
binaryData, labels, annotations, immutable, ownerReferences), headed by "# member: NAME". The
hub's side is the ConfigBundle the spec renders for the member, as hub render prints it, turned
into its ConfigMap by the reconciler's own code. A member the spec selects that does not hold the
bundle yet is listed as "would join", with the whole ConfigMap added; one that holds it and is no
longer selected as "would leave", with its ConfigMap removed. A member where a ConfigBundle of
that name exists that the hub did not place is said to be a Conflict: the hub writes nothing
there. It reads every member, selected or not, to find those that would leave; with --cluster
MEMBER it compares that member alone.

With --bundle NAME, -n NAMESPACE and --cluster MEMBER it compares the ConfigMap of the
ConfigBundle NAMESPACE/NAME in that member with what the bundle asks for, whatever its
driftPolicy and takeOver: a ConfigMap the hub does not own yet shows what taking it over would
change.

A bundle with target Secret is compared by its Secret's keys and the SHA-256 of each value
("sha256:HEX"), never a value; the hub's side is the snapshot its spec.hubSource names, read on
the hub.

The members are reached as the hub reaches them: through their kubeconfig Secrets on the hub
(MemberCluster spec.secretRef), sanitised as the hub sanitises them (no program is run, no file
is read). So it needs to read those Secrets on the hub, besides FleetBundles, MemberClusters,
ClusterSets, ClusterSetBindings and ControllerRevisions; it writes nothing, anywhere. A tenant,
who may read none of these but its namespace's (the FleetBundle editor role), gives
--member-kubeconfig: the members are reached with its own credentials, through the contexts
named after them, and the members its FleetBundles may select are read from its
ClusterSetBindings.

Exit codes, as kubectl diff: 0 when nothing differs, 1 when something differs, 2 on bad usage
or when a cluster or an object cannot be read (the members that can still are compared).

During a staged rollout it compares with what the spec (status.updateRevision) renders to, as
hub render: a member not yet updated shows the change its update brings.

With -f FILE ("-": stdin) it compares with what a FleetBundle manifest not applied yet would
make the hub write, validated as hub render -f validates it (a manifest the API server refuses:
exit 2).`,
		Example: `  hub diff web -n apps
  hub diff -f web.yaml
  hub diff web -n apps --cluster eu-1
  hub diff --bundle settings -n team-a --cluster eu-1
  hub diff web -n apps > web.diff; [ $? -le 1 ] && less web.diff`,
		Args: func(_ *cobra.Command, args []string) error { return f.checkArgs(args) },
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd, args) },
	}
	f.bind(cmd.Flags())
	cmd.Flags().Lookup("namespace").Usage = "Namespace of the FleetBundle on the hub; with --bundle, of the ConfigBundle in the member."
	cmd.Flags().StringVar(&f.member, "cluster", "", "Compare in this MemberCluster alone (required with --bundle).")
	cmd.Flags().StringVarP(&f.file, "filename", "f", "", "Compare with the FleetBundle manifest in this file (\"-\": stdin), not applied yet, instead of NAME.")
	cmd.Flags().StringVar(&f.bundle, "bundle", "", "Compare the ConfigMap of this ConfigBundle of the member, in --namespace, instead of a FleetBundle's.")
	cmd.Flags().StringVar(&f.memberKubeconfig, "member-kubeconfig", "", "Reach each member through the context named after it in this kubeconfig (your own credentials, as a tenant has them) instead of its kubeconfig Secret on the hub.")
	cmd.Flags().StringVar(&f.secretKey, "secret-key", hubv1alpha1.DefaultSecretKey, "Data key of the kubeconfig in the members' Secrets (the hub's --secret-key).")
	cmd.Flags().DurationVar(&f.timeout, "timeout", defaultTimeout, "How long reading the hub and the members may take.")
	return cmd
}

// run runs hub diff: of the FleetBundle NAME, of the manifest of -f, or of --bundle.
func (f *diffFlags) run(cmd *cobra.Command, args []string) error {
	if err := f.checkNames(args); err != nil {
		return err
	}
	hub, err := f.client()
	if err != nil {
		return &trouble{err: err}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	d := &differ{hub: hub, secretKey: f.secretKey, memberKubeconfig: f.memberKubeconfig, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr()}
	switch {
	case f.bundle != "":
		return d.result(d.bundle(ctx, f.member, types.NamespacedName{Namespace: f.namespace, Name: f.bundle}))
	case f.file != "":
		return d.result(d.manifest(ctx, hub, f, cmd.InOrStdin(), cmd.Flags().Changed("namespace")))
	}
	return d.result(d.fleetBundle(ctx, types.NamespacedName{Namespace: f.namespace, Name: args[0]}, f.member))
}

// checkArgs accepts a FleetBundle's NAME, or none with --bundle or -f.
func (f *diffFlags) checkArgs(args []string) error {
	if f.bundle != "" && f.file != "" {
		return errors.New("--bundle and -f name what to compare: give one")
	}
	if f.bundle == "" {
		return f.manifestFlags.checkArgs(args)
	}
	if len(args) > 0 {
		return fmt.Errorf("--bundle %s names what to compare: want no NAME, got %s", f.bundle, strings.Join(args, " "))
	}
	if f.member == "" {
		return errors.New("--bundle needs --cluster MEMBER: the member the ConfigBundle is in")
	}
	return nil
}

// checkNames returns a usage error for a name that cannot be one.
func (f *diffFlags) checkNames(args []string) error {
	if f.bundle != "" {
		if errs := validation.IsDNS1123Subdomain(f.bundle); len(errs) > 0 {
			return fmt.Errorf("--bundle %q is not a ConfigBundle name: %s", f.bundle, strings.Join(errs, "; "))
		}
		args = []string{f.bundle}
	}
	if _, err := f.manifestFlags.key(&f.rolloutFlags, args); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(f.member); f.member != "" && len(errs) > 0 {
		return fmt.Errorf("--cluster %q is not a MemberCluster name: %s", f.member, strings.Join(errs, "; "))
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s is not a duration to wait", f.timeout)
	}
	return nil
}

// differ compares the members' ConfigMaps with what the hub would write, reading the hub and the
// members, writing nothing.
type differ struct {
	hub       client.Reader
	secretKey string
	// memberKubeconfig is --member-kubeconfig: the members are reached through its contexts
	// named after them, not through their Secrets on the hub.
	memberKubeconfig string
	out, errOut      io.Writer
	differences      int      // members whose ConfigMap differs, or that would join or leave
	troubles         []string // members that could not be compared
}

// result is the command's outcome: trouble (exit 2) if err or a member could not be compared, a
// failure without a message (exit 1) if something differs, nil (exit 0) otherwise.
func (d *differ) result(err error) error {
	switch {
	case err != nil:
		return &trouble{err: err}
	case len(d.troubles) > 0:
		return &trouble{err: fmt.Errorf("%d member(s) could not be compared: %s", len(d.troubles), strings.Join(d.troubles, ", "))}
	case d.differences > 0:
		return failed(nil)
	}
	return nil
}

// fleetBundle compares, in each member (or in only), the ConfigMap of the FleetBundle key's
// placed bundle with the one the spec renders for the member.
func (d *differ) fleetBundle(ctx context.Context, key types.NamespacedName, only string) error {
	fb := &hubv1alpha1.FleetBundle{}
	if err := d.hub.Get(ctx, key, fb); err != nil {
		return fleetBundleError(key, err)
	}
	return d.compare(ctx, fb, only)
}

// manifest compares as fleetBundle does, for the FleetBundle manifest of -f as it would be
// once applied (asApplied).
func (d *differ) manifest(ctx context.Context, hub client.Client, f *diffFlags, stdin io.Reader, namespaceSet bool) error {
	fb, err := readManifest(f.file, stdin, f.namespace, namespaceSet)
	if err != nil {
		return err
	}
	if fb, err = asApplied(ctx, hub, fb, d.errOut); err != nil {
		return err
	}
	return d.compare(ctx, fb, f.member)
}

// compare compares, in each member (or in only), the ConfigMap of fb's placed bundle with the
// one its spec renders for the member.
func (d *differ) compare(ctx context.Context, fb *hubv1alpha1.FleetBundle, only string) error {
	key := client.ObjectKeyFromObject(fb)
	if err := placesNothing(fb); err != nil {
		return fmt.Errorf("FleetBundle %s: %w", key, err)
	}
	boundary, members, err := readPlacementView(ctx, d.hub, fb)
	if err != nil {
		return err
	}
	if members, err = onlyMember(members, only); err != nil {
		return err
	}
	rev, err := specRevision(ctx, d.hub, fb)
	if err != nil {
		return err
	}
	for i := range members {
		p := placedDiff{fb: fb, rev: rev, mc: &members[i], selected: boundary.Selects(fb, members[i].Labels), only: only != ""}
		if err := d.placed(ctx, p); err != nil {
			d.troubles = append(d.troubles, members[i].Name)
			fmt.Fprintf(d.errOut, "# member: %s: not compared: %v\n", members[i].Name, err)
		}
	}
	return nil
}

// onlyMember returns the members sorted by name, or only among them.
func onlyMember(members []hubv1alpha1.MemberCluster, only string) ([]hubv1alpha1.MemberCluster, error) {
	slices.SortFunc(members, func(a, b hubv1alpha1.MemberCluster) int { return strings.Compare(a.Name, b.Name) })
	if only == "" {
		return members, nil
	}
	i := slices.IndexFunc(members, func(mc hubv1alpha1.MemberCluster) bool { return mc.Name == only })
	if i < 0 {
		return nil, fmt.Errorf("no MemberCluster %s (kubectl get memberclusters lists them; a tenant sees those of its ClusterSetBindings)", only)
	}
	return members[i : i+1], nil
}

func (d *differ) memberCluster(ctx context.Context, name string) (*hubv1alpha1.MemberCluster, error) {
	mc := &hubv1alpha1.MemberCluster{}
	if err := d.hub.Get(ctx, client.ObjectKey{Name: name}, mc); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no MemberCluster %s (kubectl get memberclusters lists them)", name)
	} else if err != nil {
		return nil, fmt.Errorf("reading MemberCluster %s: %w", name, err)
	}
	return mc, nil
}

// specRevision is the revision the hub places of fb's spec: the kept revision of its template,
// else the next number the hub would give it.
func specRevision(ctx context.Context, hub client.Reader, fb *hubv1alpha1.FleetBundle) (rollout.Revision, error) {
	revs, err := rollout.ListRevisions(ctx, hub, fb)
	if err != nil {
		return rollout.Revision{}, fmt.Errorf("FleetBundle %s/%s: %w", fb.Namespace, fb.Name, err)
	}
	def, err := rollout.ResolveDefinition(ctx, hub, fb)
	if err != nil {
		return rollout.Revision{}, fmt.Errorf("FleetBundle %s/%s: %w", fb.Namespace, fb.Name, err)
	}
	if r, ok := rollout.RevisionOfTemplate(&def, revs); ok {
		return r, nil
	}
	return rollout.Revision{Definition: def, Hash: template.Hash(&def), Number: rollout.HighestRevision(fb, revs) + 1}, nil
}

// placedDiff is one member of a FleetBundle to compare.
type placedDiff struct {
	fb       *hubv1alpha1.FleetBundle
	rev      rollout.Revision
	mc       *hubv1alpha1.MemberCluster
	selected bool
	only     bool // the member was named (--cluster): say so even when there is nothing to compare
}

// placed compares one member's ConfigMap of the FleetBundle's placed bundle with the one the hub
// would write there: none if the member leaves the selection.
func (d *differ) placed(ctx context.Context, p placedDiff) error {
	member, err := d.memberClient(ctx, p.mc)
	if err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(p.fb)
	held, err := getOrNil(ctx, member, key, &configbundlev1alpha1.ConfigBundle{})
	if err != nil {
		return err
	}
	ownership := placement.OwnershipOf(held, key, p.fb.UID)
	heading := "# member: " + p.mc.Name
	if p.mc.Spec.Paused {
		heading += " (paused: placement writes nothing there until hub resume)"
	}
	switch {
	case ownership == placement.Foreign:
		fmt.Fprintf(d.out, "%s: ConfigBundle %s exists there and was not placed by the hub (%s): the hub writes nothing there\n", heading, key, hubv1alpha1.ConflictReason)
		return nil
	case !p.selected && ownership == placement.Absent:
		if p.only {
			fmt.Fprintf(d.out, "%s: not selected by spec.clusterSelector within the bound ClusterSets, and holds nothing of FleetBundle %s: nothing to compare\n", heading, key)
		}
		return nil
	case !p.selected:
		live, err := d.ownedConfigMap(ctx, member, held)
		if err != nil {
			return err
		}
		kind := string(held.Spec.TargetKind())
		return d.print(heading+" (would leave: no longer selected; the hub removes ConfigBundle "+key.String()+" and its "+kind+")", p.mc.Name, kind, key, live, nil)
	}
	want, err := placement.DesiredOf(p.fb, p.rev, template.Member{Name: p.mc.Name, Labels: p.mc.Labels})
	if err != nil {
		return fmt.Errorf("%s: %w", hubv1alpha1.RenderFailedReason, err)
	}
	switch ownership {
	case placement.Own:
		want.UID = held.UID
	case placement.Stale:
		heading += " (would be replaced: it holds ConfigBundle " + key.String() + " of a deleted FleetBundle of that name; the hub places it anew, its uid not known before)"
	default:
		heading += " (would join: selected; the hub places ConfigBundle " + key.String() + " there, its uid not known before)"
	}
	live, err := liveObject(ctx, member, key, want.Spec.TargetKind())
	if err != nil {
		return err
	}
	desired, err := d.wanted(ctx, want)
	if err != nil {
		return err
	}
	return d.print(heading, p.mc.Name, string(want.Spec.TargetKind()), key, live, desired)
}

// ownedConfigMap is the ConfigMap the bundle controls, which goes with it; nil if there is none.
func (d *differ) ownedConfigMap(ctx context.Context, member client.Reader, bundle *configbundlev1alpha1.ConfigBundle) (*corev1.ConfigMap, error) {
	cm, err := liveObject(ctx, member, client.ObjectKeyFromObject(bundle), bundle.Spec.TargetKind())
	if err != nil || cm == nil {
		return nil, err
	}
	if ref := metav1.GetControllerOfNoCopy(cm); ref == nil || ref.UID != bundle.UID {
		return nil, nil
	}
	return cm, nil
}

// bundle compares the ConfigMap of the ConfigBundle key in the member with what it asks for.
func (d *differ) bundle(ctx context.Context, memberName string, key types.NamespacedName) error {
	mc, err := d.memberCluster(ctx, memberName)
	if err != nil {
		return err
	}
	member, err := d.memberClient(ctx, mc)
	if err != nil {
		return fmt.Errorf("member %s: %w", memberName, err)
	}
	b, err := getOrNil(ctx, member, key, &configbundlev1alpha1.ConfigBundle{})
	switch {
	case err != nil:
		return fmt.Errorf("member %s: %w", memberName, err)
	case b == nil:
		return fmt.Errorf("no ConfigBundle %s in namespace %s of member %s", key.Name, key.Namespace, memberName)
	}
	live, err := liveObject(ctx, member, key, b.Spec.TargetKind())
	if err != nil {
		return fmt.Errorf("member %s: %w", memberName, err)
	}
	desired, err := d.wanted(ctx, b)
	if err != nil {
		return fmt.Errorf("member %s: %w", memberName, err)
	}
	return d.print("# member: "+memberName, memberName, string(b.Spec.TargetKind()), key, live, desired)
}

// print prints the heading and the unified diff from live to want (nil: none), or says that they
// match, counting a difference.
func (d *differ) print(heading, member, kind string, key types.NamespacedName, live, want *corev1.ConfigMap) error {
	a, err := configMapYAML(live)
	if err != nil {
		return err
	}
	b, err := configMapYAML(want)
	if err != nil {
		return err
	}
	path := member + "/" + strings.ToLower(kind) + "s/" + key.Namespace + "/" + key.Name
	diff, err := unifiedDiff(a, b, "live/"+path, "hub/"+path)
	if err != nil {
		return fmt.Errorf("computing the diff: %w", err)
	}
	if diff == "" {
		fmt.Fprintf(d.out, "%s: %s %s matches\n", heading, kind, key)
		return nil
	}
	d.differences++
	fmt.Fprintf(d.out, "%s\n%s", heading, diff)
	return nil
}

// memberClient returns a client of the member, built as the hub builds its own: from the
// kubeconfig in the member's Secret on the hub, sanitised (kubeconfig.RESTConfig).
func (d *differ) memberClient(ctx context.Context, mc *hubv1alpha1.MemberCluster) (client.Client, error) {
	cfg, err := d.memberConfig(ctx, mc)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = diffUserAgent
	if deadline, ok := ctx.Deadline(); ok {
		cfg.Timeout = time.Until(deadline)
	}
	scheme, err := hubmanager.Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("building a client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// memberConfig is the REST config of a member: from --member-kubeconfig, its context named
// after the member (the caller's own credentials, as a tenant has them), else from the member's
// kubeconfig Secret on the hub, sanitised (kubeconfig.RESTConfig).
func (d *differ) memberConfig(ctx context.Context, mc *hubv1alpha1.MemberCluster) (*rest.Config, error) {
	if d.memberKubeconfig != "" {
		cfg, err := loadConfig(d.memberKubeconfig, mc.Name)
		if err != nil {
			return nil, fmt.Errorf("--member-kubeconfig: %w", err)
		}
		return cfg, nil
	}
	ref := mc.Spec.SecretRef
	if ref.Name == "" {
		return nil, errors.New("its kubeconfig Secret on the hub is not yours to read: give --member-kubeconfig, with a context named after the member")
	}
	s := &corev1.Secret{}
	if err := d.hub.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, s); apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("you may not read its kubeconfig Secret %s/%s on the hub: give --member-kubeconfig, with a context named after the member: %w", ref.Namespace, ref.Name, err)
	} else if err != nil {
		return nil, fmt.Errorf("reading its kubeconfig Secret %s/%s on the hub: %w", ref.Namespace, ref.Name, err)
	}
	data := s.Data[d.secretKey]
	if len(data) == 0 {
		return nil, fmt.Errorf("its Secret %s/%s has no kubeconfig under the key %q (--secret-key)", ref.Namespace, ref.Name, d.secretKey)
	}
	cfg, err := kubeconfig.RESTConfig(data)
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig of Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return cfg, nil
}

// getOrNil reads the object key into obj; nil if it does not exist.
func getOrNil[T client.Object](ctx context.Context, c client.Reader, key types.NamespacedName, obj T) (T, error) {
	var none T
	if err := c.Get(ctx, key, obj); apierrors.IsNotFound(err) {
		return none, nil
	} else if err != nil {
		kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
		return none, fmt.Errorf("reading %s %s: %w", kind[strings.LastIndex(kind, ".")+1:], key, err)
	}
	return obj, nil
}
