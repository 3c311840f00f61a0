package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/registration"
)

// defaultTimeout is the default of --timeout.
const defaultTimeout = time.Minute

// clusterFlags locate the member and the hub clusters, the way kubectl does.
type clusterFlags struct {
	memberKubeconfig, memberContext, hubKubeconfig, hubContext string
}

func (f *clusterFlags) bindMember(fs *pflag.FlagSet) {
	fs.StringVar(&f.memberKubeconfig, "member-kubeconfig", "", "Kubeconfig with admin access to the member (default: $KUBECONFIG or ~/.kube/config).")
	fs.StringVar(&f.memberContext, "member-context", "", "Context of --member-kubeconfig to use (default: its current context).")
}

func (f *clusterFlags) bindHub(fs *pflag.FlagSet) {
	fs.StringVar(&f.hubKubeconfig, "hub-kubeconfig", "", "Kubeconfig of the hub cluster (default: $KUBECONFIG or ~/.kube/config).")
	fs.StringVar(&f.hubContext, "hub-context", "", "Context of --hub-kubeconfig to use (default: its current context).")
}

// registrationFlags are the flags of hub register and hub unregister.
type registrationFlags struct {
	clusterFlags
	opts    registration.Options
	timeout time.Duration
	labels  []string
	wait    bool
}

// bindShared defines the flags register and unregister share, all of which both use: where the
// member and the hub are, where the member's Secret is on the hub and its identity in the
// member, and --timeout. Each command adds its own; neither accepts a flag it would ignore.
func (f *registrationFlags) bindShared(fs *pflag.FlagSet) {
	fs.SortFlags = false
	f.bindMember(fs)
	f.bindHub(fs)
	fs.StringVar(&f.opts.SecretNamespace, "secret-namespace", hubv1alpha1.DefaultSecretNamespace, "Hub namespace of the member's kubeconfig Secret (the hub's --secret-namespace).")
	fs.StringVar(&f.opts.SecretLabel, "secret-label", hubv1alpha1.DefaultSecretLabel, "Label marking the Secret as a member (the hub's --secret-label).")
	fs.StringVar(&f.opts.MemberNamespace, "member-namespace", hubv1alpha1.DefaultSecretNamespace, "Member namespace of the hub's ServiceAccount and its token Secrets.")
	fs.DurationVar(&f.timeout, "timeout", defaultTimeout, "How long the whole operation may take, any waiting included.")
}

// bindRegister defines the flags of hub register alone.
func (f *registrationFlags) bindRegister(fs *pflag.FlagSet) {
	fs.StringVar(&f.opts.Server, "server", "", "API server URL the hub uses to reach the member, when it differs from the member kubeconfig's (for example kind's --internal address).")
	fs.StringVar(&f.opts.SecretKey, "secret-key", hubv1alpha1.DefaultSecretKey, "Data key of the kubeconfig in the Secret (the hub's --secret-key).")
	fs.DurationVar(&f.opts.TokenDuration, "token-ttl", registration.DefaultTokenDuration, "Lifetime of the hub's token (at least 10m, for example 24h): the hub renews it itself once 80% of it has passed.")
	fs.DurationVar(&f.opts.TokenDuration, "token-duration", registration.DefaultTokenDuration, "Former name of --token-ttl, kept so that scripts go on working.")
	fs.StringArrayVar(&f.labels, "label", nil, "Label KEY=VALUE of the member's MemberCluster on the hub; repeatable. The labels given replace those a previous hub register set.")
	fs.BoolVar(&f.wait, "wait", false, "Wait until the member's MemberCluster is Ready (bounded by --timeout).")
	fs.BoolVar(&f.opts.Force, "force", false, "Register a cluster already registered under another name, or move NAME to another cluster.")
	fs.BoolVar(&f.opts.AllowHubAsMember, "allow-hub-as-member", false, "Register the hub cluster itself as a member: a hub that manages itself, for single-cluster setups. Without it, a member that is the hub cluster (same kube-system uid) is refused.")
}

func newRegisterCommand() *cobra.Command {
	f := &registrationFlags{}
	cmd := &cobra.Command{
		Use:   "register NAME [flags]",
		Short: "Register a member cluster with the hub",
		Long: `Registers a member cluster with the hub in one step. In the member it applies a ServiceAccount and
a ClusterRoleBinding of its own for NAME (configbundle-hub-NAME, configbundle-hub-member-NAME)
to the least-privilege ClusterRole configbundle-hub-member (ConfigMaps and Secrets, the Secrets
of ConfigBundles with target Secret, ConfigBundles, Events; it also lets the hub create
namespaces, for FleetBundles with spec.createNamespace, never delete one), obtains a token bound to a token
Secret of NAME, checks that the token works, and writes the labelled kubeconfig Secret NAME on
the hub. The hub renews that token itself (TokenRequest, allowed by the Role configbundle-hub-NAME
for that ServiceAccount alone) once 80% of --token-ttl has passed. Running it again rotates the
token and revokes the previous one. The ClusterRole grants the hub read and patch of Deployments, StatefulSets and DaemonSets, which rollouts that observe or
restart the workloads reading a bundle need.

It refuses the hub cluster itself (the member and the hub have the same kube-system namespace
uid: without --member-kubeconfig and --member-context, both default to $KUBECONFIG's current
context) unless --allow-hub-as-member; a cluster that is already a member under another name,
naming that member, and a NAME registered for another cluster, unless --force.`,
		Example: `  hub register eu-1 --member-context kind-eu-1 --hub-context kind-hub
  hub register eu-1 --member-context kind-eu-1 --hub-context kind-hub --server https://eu-1-control-plane:6443
  hub register eu-1 --member-context kind-eu-1 --label env=prod --label region=eu --wait --timeout 2m
  hub register eu-1 --member-context kind-eu-1 --token-ttl 24h    # a day-long token the hub renews
  hub register local --allow-hub-as-member    # a single cluster, hub and member`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error { return f.register(cmd, args[0]) },
	}
	f.bindShared(cmd.Flags())
	f.bindRegister(cmd.Flags())
	return cmd
}

func newUnregisterCommand() *cobra.Command {
	f := &registrationFlags{}
	cmd := &cobra.Command{
		Use:   "unregister NAME [flags]",
		Short: "Remove a member: its Secret on the hub, the hub's ServiceAccount, RBAC and tokens in the member",
		Long: `Removes the member NAME: deletes its kubeconfig Secret on the hub (the hub drops the member), then,
in the member, the ServiceAccount, ClusterRoleBinding and token Secrets of NAME (which revokes its
tokens), and the ClusterRole configbundle-hub-member once no other registration binds it.
ConfigBundles and ConfigMaps in the member are left as they are, those FleetBundles placed too,
no longer healed; with --remove-placed, once the hub has let go of the member (its MemberCluster
is gone) and before its access is revoked, the ConfigBundles FleetBundles placed there are
deleted (and their ConfigMaps with them).

It refuses, changing nothing, when NAME is not a registered member on the hub, or when the member
credentials reach another cluster than the one NAME's Secret points at.`,
		Example: `  hub unregister eu-1 --member-context kind-eu-1 --hub-context kind-hub
  hub unregister eu-1 --member-context kind-eu-1 --hub-context kind-hub --remove-placed`,
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error { return f.unregister(cmd, args[0]) },
	}
	f.bindShared(cmd.Flags())
	cmd.Flags().BoolVar(&f.opts.RemovePlaced, "remove-placed", false, "Also delete the ConfigBundles FleetBundles placed in the member (once the hub has let go of it, before its access is revoked). Without it they stay, no longer healed.")
	return cmd
}

// complete turns the flags into registration.Options for the member name; bad flag values are
// usage errors, kubeconfigs that do not load failures.
func (f *registrationFlags) complete(name string) (registration.Options, error) {
	opts := f.opts
	opts.Name = name
	var err error
	if opts.Labels, err = registration.ParseLabels(f.labels); err != nil {
		return opts, err
	}
	if opts.Member, err = loadConfig(f.memberKubeconfig, f.memberContext); err != nil {
		return opts, failed(fmt.Errorf("member kubeconfig: %w", err))
	}
	if opts.Hub, err = loadConfig(f.hubKubeconfig, f.hubContext); err != nil {
		return opts, failed(fmt.Errorf("hub kubeconfig: %w", err))
	}
	return opts, nil
}

func (f *registrationFlags) register(cmd *cobra.Command, name string) error {
	opts, err := f.complete(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	out := cmd.OutOrStdout()
	res, err := registration.Register(ctx, opts)
	if err != nil {
		return failed(err)
	}
	fmt.Fprintf(out, "Registered member %s: Secret %s/%s on the hub, server %s, token valid until %s.\n",
		name, res.SecretNamespace, res.SecretName, res.Server, res.TokenExpires.Format(time.RFC3339))
	fmt.Fprintf(out, "The hub may read and write ConfigMaps and Secrets in member %s (ClusterRole configbundle-hub-member): the Secrets are those of ConfigBundles with target Secret, and the hub caches no other.\n", name)
	if res.RevokedTokens > 0 {
		fmt.Fprintf(out, "Revoked the previous token of member %s (%d token Secret(s) deleted in the member).\n", name, res.RevokedTokens)
	}
	if !f.wait {
		return nil
	}
	mc, err := registration.WaitReady(ctx, opts)
	if err != nil {
		return failed(err)
	}
	reason := meta.FindStatusCondition(mc.Status.Conditions, hubv1alpha1.ReadyCondition).Reason
	fmt.Fprintf(out, "Member %s is Ready (%s).\n", name, reason)
	return nil
}

func (f *registrationFlags) unregister(cmd *cobra.Command, name string) error {
	opts, err := f.complete(name)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	res, err := registration.Unregister(ctx, opts)
	if err != nil {
		return failed(err)
	}
	out := cmd.OutOrStdout()
	if res.DeletedMemberCluster {
		fmt.Fprintf(out, "No hub let go of member %s in time (is a hub running?): deleted its MemberCluster before removing the placed bundles.\n", name)
	}
	left := "ConfigBundles and ConfigMaps in the member are left as they are, those FleetBundles placed too (--remove-placed deletes these)."
	if opts.RemovePlaced {
		left = fmt.Sprintf("Removed %d ConfigBundle(s) that FleetBundles placed in the member; the other ConfigBundles and ConfigMaps are left as they are.", res.RemovedPlaced)
	}
	fmt.Fprintf(out, "Unregistered member %s: deleted its Secret %s/%s on the hub, and its ServiceAccount %s/%s, ClusterRoleBinding %s and token Secrets in the member, which revokes its tokens. %s\n",
		name, opts.SecretNamespace, name, opts.MemberNamespace, registration.ServiceAccountName(name), registration.ClusterRoleBindingName(name), left)
	return nil
}

// loadConfig loads a client config the way kubectl does. This runs on the operator's machine
// with the operator's own kubeconfig: unlike the hub, it may use exec plugins and files. A
// context that is not in the kubeconfig (the one named, else its current one) fails naming the
// contexts there are.
func loadConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, err
	}
	if name := cmp.Or(context, raw.CurrentContext); name != "" && raw.Contexts[name] == nil {
		return nil, fmt.Errorf("no context %q in %s; %s", name, strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator)),
			contextsThere(slices.Collect(maps.Keys(raw.Contexts))))
	}
	return loader.ClientConfig()
}

// maxContextsListed bounds the contexts a missing context's error names.
const maxContextsListed = 20

// contextsThere names a kubeconfig's contexts, sorted, at most maxContextsListed of them.
func contextsThere(names []string) string {
	if len(names) == 0 {
		return "it has no contexts"
	}
	slices.Sort(names)
	list := strings.Join(names[:min(len(names), maxContextsListed)], ", ")
	if len(names) > maxContextsListed {
		list += fmt.Sprintf(" and %d more", len(names)-maxContextsListed)
	}
	return "its contexts: " + list
}
