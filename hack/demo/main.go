// Command demo runs ConfigBundle Hub on an embedded local fleet (see package demo). Use
// `make demo`, which builds the control-plane binaries and the hub first.
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

	"configbundle.dev/hub/internal/demo"
	"configbundle.dev/hub/internal/testing/controlplane"
)

func main() {
	opts := demo.Options{}
	flag.StringVar(&opts.HubBinary, "hub-binary", "bin/hub", "The hub binary to run.")
	flag.IntVar(&opts.Members, "members", 3, "Number of member clusters.")
	flag.BoolVar(&opts.Keep, "keep", false, "Keep the fleet running after the tour, until Ctrl-C.")
	flag.Parse()
	// The control planes log through controller-runtime; the narration is the demo's output.
	ctrl.SetLogger(logr.Discard())
	if err := controlplane.CheckAssets(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := demo.Run(ctx, opts); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
