// Command testreport reads the `go test -json` files that `make test` writes through gotestsum
// and prints where the time went: each package's time, slowest first, the 20 slowest tests, and
// a closing line "tests: N passed, N failed, N skipped".
//
//	go run ./hack/testreport bin/test/*.json
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is the part of a test2json event that the report reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

// timing is one package's or one test's result.
type timing struct {
	name    string
	seconds float64
	action  string
}

// tally is what the files say.
type tally struct {
	packages, tests         []timing
	passed, failed, skipped int
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testreport FILE.json...")
		os.Exit(2)
	}
	var t tally
	for _, path := range os.Args[1:] {
		if err := t.read(path); err != nil {
			fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
			os.Exit(1)
		}
	}
	t.print(os.Stdout)
}

// read adds the events of one file.
func (t *tally) read(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || (e.Action != "pass" && e.Action != "fail" && e.Action != "skip") {
			continue
		}
		if e.Test == "" {
			t.packages = append(t.packages, timing{e.Package, e.Elapsed, e.Action})
			continue
		}
		t.tests = append(t.tests, timing{e.Package + "." + e.Test, e.Elapsed, e.Action})
		if strings.Contains(e.Test, "/") {
			continue // subtests are counted in their parent
		}
		switch e.Action {
		case "pass":
			t.passed++
		case "fail":
			t.failed++
		case "skip":
			t.skipped++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// print writes the report.
func (t *tally) print(w io.Writer) {
	slowestFirst := func(s []timing) {
		sort.SliceStable(s, func(i, j int) bool { return s[i].seconds > s[j].seconds })
	}
	slowestFirst(t.packages)
	slowestFirst(t.tests)
	fmt.Fprintln(w, "Time per package, slowest first:")
	for _, p := range t.packages {
		fmt.Fprintf(w, "  %8.1f s  %-4s %s\n", p.seconds, p.action, p.name)
	}
	fmt.Fprintln(w, "The 20 slowest tests:")
	for _, s := range t.tests[:min(20, len(t.tests))] {
		fmt.Fprintf(w, "  %8.1f s  %-4s %s\n", s.seconds, s.action, s.name)
	}
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped)
}
