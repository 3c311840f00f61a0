package suite

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"configbundle.dev/hub/internal/testing/controlplane"
)

// DefaultStartTimeout bounds the start of a suite's control planes, generous for a loaded
// two-core machine.
const DefaultStartTimeout = 3 * time.Minute

// Options describe a suite.
type Options struct {
	// Planes are the control planes of the suite, started together.
	Planes []controlplane.Plane

	// StartTimeout bounds the start of the planes and Setup. Defaults to DefaultStartTimeout.
	StartTimeout time.Duration

	// Setup, if set, prepares the suite once its planes are up (in the order of Planes): ctx
	// ends when the tests have run, startCtx when StartTimeout has passed. An error fails the
	// suite before any test runs. Defaults to nil.
	Setup func(ctx, startCtx context.Context, planes []*controlplane.ControlPlane) error
}

// Run runs the tests of m on the suite's control planes and returns the exit code for os.Exit.
func Run(m *testing.M, opts Options) int {
	if err := controlplane.CheckAssets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapcore.Level(logLevel()))))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startCtx, startCancel := context.WithTimeout(ctx, cmp.Or(opts.StartTimeout, DefaultStartTimeout))
	defer startCancel()
	began := time.Now()
	cps, err := controlplane.Start(startCtx, opts.Planes...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control planes:", err)
		return 1
	}
	defer func() {
		cancel() // the suite's managers stop before their API servers
		if err := controlplane.StopAll(cps); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control planes:", err)
		}
	}()
	names := make([]string, 0, len(cps))
	for _, cp := range cps {
		names = append(names, cp.Name)
	}
	fmt.Fprintf(os.Stderr, "started control planes %s in %s\n", strings.Join(names, ", "), time.Since(began).Round(time.Millisecond))
	if opts.Setup != nil {
		if err := opts.Setup(ctx, startCtx, cps); err != nil {
			fmt.Fprintln(os.Stderr, "setting up the suite:", err)
			return 1
		}
	}
	return m.Run()
}

// logLevel is the level of the suites' logger: errors only, or everything with
// TEST_VERBOSE_LOGS set.
func logLevel() int8 {
	if os.Getenv("TEST_VERBOSE_LOGS") != "" {
		return -1
	}
	return 5 // errors only
}
