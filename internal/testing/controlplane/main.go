package controlplane

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// RunOne is the body of a TestMain whose package's tests share one control plane: it starts one
// named "hub" with opts, calls setUp with it, runs the tests, stops the control plane and returns
// the exit code. It is for packages that internal/testing/suite would import in a cycle.
func RunOne(m *testing.M, opts Options, setUp func(*ControlPlane) error) int {
	if err := CheckAssets(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = DefaultStartTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cps, err := Start(ctx, Named(opts, "hub")...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the control plane:", err)
		return 1
	}
	defer func() {
		if err := StopAll(cps); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	if err := setUp(cps[0]); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the tests:", err)
		return 1
	}
	return m.Run()
}
