package hubprocess

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRunCommand: a hub binary with hub run is started with it; one built before it existed,
// which answers "run --help" with its own help and exit 0, without it.
func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	for name, script := range map[string]string{
		"current": "#!/bin/sh\necho 'Usage:'\necho '  hub run [flags]'\n",
		"older":   "#!/bin/sh\necho 'Usage:'\necho '  hub [flags]'\necho '  hub [command]'\n",
		"broken":  "#!/bin/sh\nexit 2\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]int{"current": 1, "older": 0, "broken": 0} {
		if got := runCommand(filepath.Join(dir, name)); len(got) != want {
			t.Errorf("runCommand(%s) = %v, want %d word(s)", name, got, want)
		}
	}
}
