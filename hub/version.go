package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"configbundle.dev/hub/pkg/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the hub's version, git commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := fmt.Fprint(cmd.OutOrStdout(), version.Get()); err != nil {
				return failed(err)
			}
			return nil
		},
	}
}
