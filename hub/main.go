// Command hub is ConfigBundle Hub: it discovers member clusters from kubeconfig Secrets on the
// hub cluster, reconciles ConfigBundles in every member, and reports their health as
// MemberCluster and Fleet objects on the hub.
//
//	hub run [flags]             run the hub (the controller)
//	hub register NAME [flags]   register a member cluster (see hub register --help)
//	hub unregister NAME [flags] undo a registration
//	hub status [flags]          print the fleet's health; exit 0 only if Ready and fresh
//	hub rollout SUBCOMMAND NAME status, history, undo, pause, resume or approve a FleetBundle's rollout
//	hub render NAME [flags]     print what a FleetBundle places in each member, rendered
//	hub diff NAME [flags]       show what the hub would change in the members' ConfigMaps
//	hub pause NAME [flags]      pause a member for maintenance: placement writes nothing to it
//	hub resume NAME [flags]     resume a paused member: placement brings it up to date
//	hub version                 print the version
//	hub help [command]          print help
//
// Without a command, hub prints its help and exits 2: it starts nothing.
//
// Exit codes: 0 success, 1 failure, 2 usage error; hub diff's are kubectl diff's: 0 nothing
// differs, 1 something differs, 2 bad usage or a cluster that cannot be read.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"configbundle.dev/hub/pkg/hubmanager"
	"configbundle.dev/hub/pkg/version"
)

// subcommands build the subcommands of hub: a new one is one more constructor here.
var subcommands = []func() *cobra.Command{
	newRegisterCommand,
	newUnregisterCommand,
	newVersionCommand,
	newStatusCommand,
	newRolloutCommand,
	newRenderCommand,
	newDiffCommand,
	newPauseCommand,
	newResumeCommand,
}

func main() {
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// newRootCommand returns the command hub. Without a command it starts nothing: it prints its help
// and exits 2 (execute). The flags of hub run are also its own, hidden, so that the invocation of
// earlier releases (hub --leader-elect ...) still runs the hub, saying that it is deprecated.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "hub",
		Short: "ConfigBundle Hub enforces, heals and reports ConfigBundles across a fleet of clusters",
		Long: `ConfigBundle Hub enforces, heals and reports ConfigBundles across a fleet of clusters.
"hub run" runs the hub (the controller); the other commands register members and inspect or
steer the fleet. Without a command, hub prints this help and exits 2: it starts nothing.`,
		Args:              cobra.NoArgs,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	runFlags(root, func(cmd *cobra.Command, run func() error) error {
		fmt.Fprintln(cmd.ErrOrStderr(), "hub: running the hub without the command run is deprecated and will be removed in the next release: use hub run")
		return run()
	})
	root.Flags().VisitAll(func(f *pflag.Flag) { f.Hidden = true })
	root.AddCommand(newRunCommand())
	for _, newCommand := range subcommands {
		root.AddCommand(newCommand())
	}
	return root
}

// newRunCommand returns the command hub run: it runs the hub.
func newRunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the hub: the controller that reconciles every member",
		Long: `Runs ConfigBundle Hub against the hub cluster of --kubeconfig (or the in-cluster config): it
discovers member clusters from labelled kubeconfig Secrets, reconciles every member's
ConfigBundles into ConfigMaps, heals drift, and reports each member's health as a MemberCluster
and the fleet's as the Fleet "default". Members are added with "hub register".

It runs until SIGTERM or SIGINT (exit 0), and exits 1 if it cannot start or stops on an error.
With --sharded or --leader-elect, a process whose --replica-id is held by another live process
(its Lease is renewed by the other) writes nothing, records the Event DuplicateReplica on the
Fleet and exits 1 a --lease-duration later; the other runs on.`,
		Args: cobra.NoArgs,
	}
	runFlags(cmd, func(_ *cobra.Command, run func() error) error { return run() })
	return cmd
}

// runFlags gives cmd the flags of hubmanager.Options, zap's logging flags and controller-runtime's
// --kubeconfig, each with the default it has always had, and makes it run the hub through
// start.
func runFlags(cmd *cobra.Command, start func(cmd *cobra.Command, run func() error) error) {
	var (
		opts    hubmanager.Options
		zapOpts zap.Options
	)
	goFlags := flag.NewFlagSet("hub", flag.ContinueOnError)
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil { // controller-runtime's, read by ctrl.GetConfig
		goFlags.Var(f.Value, f.Name, "Kubeconfig of the hub cluster. Without it: $KUBECONFIG, else the in-cluster config, else ~/.kube/config.")
	}
	opts.BindFlags(goFlags)
	zapOpts.BindFlags(goFlags)
	// controller-runtime's help says 'epoch', but its default encoder is RFC 3339: say what the
	// logs show.
	if f := goFlags.Lookup("zap-time-encoding"); f != nil {
		f.Usage = "Zap time encoding (one of 'epoch', 'millis', 'nano', 'iso8601', 'rfc3339' or 'rfc3339nano'). Defaults to 'rfc3339'."
	}
	cmd.Flags().AddGoFlagSet(goFlags)
	cmd.Flags().SortFlags = false
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := opts.Validate(); err != nil {
			return err // a usage error, said before anything starts
		}
		return start(cmd, func() error { return runHub(opts, zapOpts) })
	}
}

// runHub runs the hub until SIGTERM or SIGINT. Its failures are logged, not returned.
func runHub(opts hubmanager.Options, zapOpts zap.Options) error {
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	// client-go and leader election log through klog: the same structured lines, not klog's
	// text (klog's verbosity maps to zap's: -zap-log-level=2 shows klog's V(2)).
	klog.SetLogger(logger)
	log := ctrl.Log.WithName("hub")

	if err := disableWatchListClient(); err != nil {
		log.Error(err, "Configuring client-go failed")
		return failed(nil)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Loading the hub cluster's config failed")
		return failed(nil)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := ctrlmetrics.Registry.Register(version.NewBuildInfoCollector()); err != nil {
		log.Error(err, "Registering the build info metric failed")
		return failed(nil)
	}
	hub, err := hubmanager.New(cfg, opts)
	if err != nil {
		log.Error(err, "Setting up the hub failed")
		return failed(nil)
	}
	info := version.Get()
	log.Info("Starting the hub", "version", info.Version, "gitCommit", info.GitCommit,
		"secretNamespace", opts.SecretNamespace, "secretLabel", opts.SecretLabel)
	err = hub.Start(ctx)
	switch {
	case errors.Is(err, hubmanager.ErrNoHubCRDs):
		// Advice to whoever started it, not a crash: one line on stderr, no stack trace.
		return failed(fmt.Errorf("%s: %w", cfg.Host, err))
	case err != nil && !errors.Is(err, context.Canceled):
		log.Error(err, "The hub stopped")
		return failed(nil)
	}
	return nil
}

// disableWatchListClient turns off client-go's streaming lists (WatchListClient, on by default
// since 1.35) for the whole process. They wait for the API server's watch cache to be provably
// fresh: measured, every cache of a joining member then took 1.1 s to sync instead of
// milliseconds. A member's lists are small; joining fast matters.
func disableWatchListClient() error {
	gates, ok := clientfeatures.FeatureGates().(interface {
		Set(clientfeatures.Feature, bool) error
	})
	if !ok {
		return fmt.Errorf("client-go's feature gates cannot be set")
	}
	if err := gates.Set(clientfeatures.WatchListClient, false); err != nil {
		return fmt.Errorf("turning off client-go's WatchListClient: %w", err)
	}
	return nil
}
