package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra/doc"
)

// updateCLIReference makes TestCLIReference write docs/reference/cli instead of comparing it:
// `make docs` runs it so.
var updateCLIReference = flag.Bool("update-cli-reference", false, "write docs/reference/cli from the commands (make docs)")

// cliReference is the folder of the CLI's reference pages, one per command.
var cliReference = filepath.Join("..", "docs", "reference", "cli")

// TestCLIReference requires docs/reference/cli to be the pages cobra/doc generates from the
// commands, so that a changed flag or command cannot leave its reference behind.
func TestCLIReference(t *testing.T) {
	generated := t.TempDir()
	root := newRootCommand()
	root.DisableAutoGenTag = true // no date: the pages change only when the commands do
	if err := doc.GenMarkdownTree(root, generated); err != nil {
		t.Fatal(err)
	}
	if *updateCLIReference {
		if err := os.RemoveAll(cliReference); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(cliReference, os.DirFS(generated)); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, got := pages(t, generated), pages(t, cliReference)
	for name, page := range want {
		if got[name] != page {
			t.Errorf("%s is stale or missing: run make docs", filepath.Join(cliReference, name))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s documents no command: run make docs", filepath.Join(cliReference, name))
		}
	}
}

// pages returns the content of each file of dir, by name.
func pages(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(raw)
	}
	return out
}
