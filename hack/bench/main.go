// Command bench measures ConfigBundle Hub on real control planes and prints a table: heal latency
// against the physical floor (a minimal client-go healer) and the seed operator's polling model,
// convergence throughput and API writes per bundle, the hub's cost per member and per bundle, and
// join time and heal latency with unreachable members among the healthy ones. `make bench` runs
// it; `go test ./hack/bench` runs a small smoke version that checks correctness only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	cfg := fullConfig()
	flag.StringVar(&cfg.HubBinary, "hub-binary", "bin/hub", "The hub binary to measure.")
	flag.IntVar(&cfg.Members, "members", cfg.Members, "Member clusters for the cost-per-member curve (measured at 1, 2, 4, ... up to this).")
	flag.IntVar(&cfg.BundlesPerMember, "bundles", cfg.BundlesPerMember, "ConfigBundles per member in the throughput run.")
	flag.IntVar(&cfg.Drifts, "drifts", cfg.Drifts, "Drifts per heal-latency run, spread over the heal members.")
	flag.IntVar(&cfg.Unmanaged, "unmanaged", cfg.Unmanaged, "Unmanaged ConfigMaps created in one member.")
	smoke := flag.Bool("smoke", false, "Run the small smoke configuration.")
	flag.Parse()
	if *smoke {
		bin := cfg.HubBinary
		cfg = smokeConfig()
		cfg.HubBinary = bin
	}
	ctrl.SetLogger(logr.Discard())
	if os.Getenv("BENCH_DEBUG") != "" {
		cpOutput = os.Stderr
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "bench: KUBEBUILDER_ASSETS is not set; run it with `make bench`")
		os.Exit(1)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	res, err := run(ctx, cfg, os.Stderr)
	if res != nil {
		res.print(os.Stdout, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
