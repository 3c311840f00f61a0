// Command hub is ConfigBundle Hub: it discovers member clusters from kubeconfig Secrets on the
// hub cluster, reconciles ConfigBundles in every member, and reports their health as
// MemberCluster and Fleet objects on the hub.
//
//	hub [flags]                 run the hub
//	hub register NAME [flags]   register a member cluster (see hub register --help)
//	hub unregister NAME [flags] undo a registration
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"configbundle.dev/hub/pkg/hubrun"
	spokeprovider "configbundle.dev/hub/spoke-provider"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "register", "unregister":
			os.Exit(registerCommand(os.Args[1], os.Args[2:]))
		}
	}
	os.Exit(run())
}

func run() int {
	opts := hubrun.Options{}
	fs := flag.CommandLine
	fs.StringVar(&opts.SecretNamespace, "secret-namespace", hubrun.DefaultSecretNamespace, "Namespace of the hub cluster holding the members' kubeconfig Secrets.")
	fs.StringVar(&opts.SecretLabel, "secret-label", hubrun.DefaultSecretLabel, `Label that makes a Secret a member, with the value "true".`)
	fs.StringVar(&opts.SecretKey, "secret-key", hubrun.DefaultSecretKey, "Key of the Secret's data holding the kubeconfig.")
	fs.DurationVar(&opts.ResyncPeriod, "resync-period", hubrun.DefaultResyncPeriod, "How often every ConfigBundle is reconciled without an event, a safety net under the watches.")
	fs.DurationVar(&opts.ProbeInterval, "probe-interval", hubrun.DefaultProbeInterval, "How often each member's API server is probed; two failed probes in a row make it Unreachable.")
	var qps float64
	fs.Float64Var(&qps, "member-qps", spokeprovider.DefaultQPS, "Requests per second the hub may send to each member (client-side limit; a bundle costs two writes).")
	fs.IntVar(&opts.MemberBurst, "member-burst", spokeprovider.DefaultBurst, "Burst of requests the hub may send to each member.")
	fs.BoolVar(&opts.InstallCRDs, "install-crds", true, "Apply the ConfigBundle CRD to each member when it joins (server-side apply).")
	fs.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8080", `Address of the Prometheus metrics endpoint; "0" disables it.`)
	fs.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", `Address of the /healthz and /readyz endpoints; "0" disables them.`)
	fs.BoolVar(&opts.LeaderElect, "leader-elect", false, "Elect a leader among hub replicas (a Lease in --secret-namespace), so that only one reconciles.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n       %s register|unregister NAME [flags]\n\nRuns ConfigBundle Hub against the hub cluster of --kubeconfig (or the in-cluster config).\n\nFlags:\n", os.Args[0], os.Args[0])
		fs.PrintDefaults()
	}
	flag.Parse()
	opts.MemberQPS = float32(qps)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("hub")

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Loading the hub cluster's config failed")
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
	hub, err := hubrun.New(cfg, opts)
	if err != nil {
		log.Error(err, "Setting up the hub failed")
		return 1
	}
	log.Info("Starting the hub", "secretNamespace", opts.SecretNamespace, "secretLabel", opts.SecretLabel)
	if err := hub.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error(err, "The hub stopped")
		return 1
	}
	return 0
}
