// Command links fails when a relative link of the Markdown files it is given (files, or folders
// searched for *.md) names a file that does not exist or a heading that file lacks. `make verify`
// runs it on README.md, CHANGELOG.md and docs/.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// link matches a Markdown link's target, [text](target "title").
var link = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// code matches fenced code blocks and inline code, whose brackets are not links.
var code = regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")

func main() {
	var files []string
	for _, arg := range os.Args[1:] {
		err := filepath.WalkDir(arg, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	broken := 0
	for _, f := range files {
		for _, problem := range check(f) {
			fmt.Fprintf(os.Stderr, "%s: %s\n", f, problem)
			broken++
		}
	}
	if broken > 0 {
		fmt.Fprintf(os.Stderr, "%d broken links\n", broken)
		os.Exit(1)
	}
}

// check returns the broken relative links of the Markdown file f.
func check(f string) []string {
	raw, err := os.ReadFile(f)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(string(raw), ""), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		path, anchor, _ := strings.Cut(target, "#")
		file := f
		if path != "" {
			file = filepath.Join(filepath.Dir(f), path)
		}
		if _, err := os.Stat(file); err != nil {
			problems = append(problems, "no file "+target)
			continue
		}
		if anchor != "" && strings.HasSuffix(file, ".md") && !anchors(file)[anchor] {
			problems = append(problems, "no heading "+target)
		}
	}
	return problems
}

// anchors returns the anchors GitHub makes of the headings of the Markdown file f.
func anchors(f string) map[string]bool {
	raw, _ := os.ReadFile(f)
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		a := anchor(strings.TrimLeft(line, "#"))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// anchor is the anchor GitHub gives a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
