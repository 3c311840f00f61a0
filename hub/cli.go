package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes of hub, a contract scripts rely on.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // the command line was wrong: unknown command or flag, bad flag value, missing NAME
	// exitTrouble is hub diff's exit code when it could not compare (a cluster unreachable, an
	// object unreadable), as kubectl diff's: its 1 means a difference found.
	exitTrouble = 2
)

// failure is the error of a command that ran and failed (exit code 1), as opposed to a usage
// error. A nil err means the failure has been reported already (the hub logs its own).
type failure struct{ err error }

func (f *failure) Error() string {
	if f.err == nil {
		return "failed"
	}
	return f.err.Error()
}

func (f *failure) Unwrap() error { return f.err }

// failed marks err as the failure of a command that ran.
func failed(err error) error { return &failure{err: err} }

// trouble is the error of a command whose exit code 1 says something else than a failure (hub
// diff: a difference found) when it could not do its work: exit 2, said without the usage hint.
type trouble struct{ err error }

func (t *trouble) Error() string { return t.err.Error() }

func (t *trouble) Unwrap() error { return t.err }

// execute runs hub with args, writing help and results to stdout and errors to stderr, and
// returns the exit code. Any error that is not a failure or a trouble is a usage error.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(goStyleFlags(root, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	if len(args) == 0 {
		// A controller starts only when asked (hub run): one started by mistake, beside the real
		// hub, would join every member.
		root.SetOut(stderr)
		root.InitDefaultHelpCmd()
		root.InitDefaultHelpFlag()
		_ = root.Help()
		return exitUsage
	}
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if t := (*trouble)(nil); errors.As(err, &t) {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), t.err)
		return exitTrouble
	}
	if f := (*failure)(nil); errors.As(err, &f) {
		if f.err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), f.err)
		}
		return exitFailure
	}
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
	return exitUsage
}

// goStyleFlags rewrites the single-dash long flags that hub has always accepted, Go's flag
// package style (-kubeconfig=FILE, -member-context NAME), into the double-dash form of pflag,
// which would read -kubeconfig as the shorthands k, u, b and so on. Only names of hub's long
// flags are rewritten, and nothing after "--".
func goStyleFlags(root *cobra.Command, args []string) []string {
	long := map[string]bool{"help": true}
	var collect func(*cobra.Command)
	collect = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		for _, sub := range c.Commands() {
			collect(sub)
		}
	}
	collect(root)
	out := slices.Clone(args)
	for i, arg := range out {
		if arg == "--" {
			break
		}
		if len(arg) > 2 && arg[0] == '-' && arg[1] != '-' {
			if name, _, _ := strings.Cut(arg[1:], "="); long[name] {
				out[i] = "-" + arg
			}
		}
	}
	return out
}

// exactlyOneName accepts exactly one positional argument, the member's NAME.
func exactlyOneName(_ *cobra.Command, args []string) error {
	switch len(args) {
	case 1:
		return nil
	case 0:
		return errors.New("the member's NAME is missing")
	default:
		return fmt.Errorf("want one NAME, got %d arguments: %s", len(args), strings.Join(args, " "))
	}
}
