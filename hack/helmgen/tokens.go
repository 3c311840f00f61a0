package main

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// tokens hands out placeholders: inline ones are replaced by an expression within their line;
// block ones replace their whole line with text built for the line's indentation.
type tokens struct {
	n      int
	inline map[string]string
	block  map[string]func(indent string) string
}

var tokenRE = regexp.MustCompile(`__helmgen_[0-9]+__`)

func newTokens() *tokens {
	return &tokens{inline: map[string]string{}, block: map[string]func(string) string{}}
}

func (t *tokens) next() string {
	t.n++
	return fmt.Sprintf("__helmgen_%d__", t.n)
}

// expr returns a placeholder for a template expression within a line.
func (t *tokens) expr(e string) string {
	tok := t.next()
	t.inline[tok] = e
	return tok
}

// lines returns a placeholder whose whole line becomes f(its indentation).
func (t *tokens) lines(f func(indent string) string) string {
	tok := t.next()
	t.block[tok] = f
	return tok
}

// braceEscaper makes braces already in the manifests (a PrometheusRule's {{ $labels.x }}) literal
// text for Helm's template engine; one pass, so its own output is not escaped again.
var braceEscaper = strings.NewReplacer("{{", `{{"{{"}}`, "}}", `{{"}}"}}`)

// template marshals obj and replaces its placeholders.
func (t *tokens) template(obj object) (string, error) {
	raw, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(braceEscaper.Replace(string(raw)), "\n"), "\n") {
		out = append(out, t.expandLine(line))
	}
	text := strings.Join(out, "\n") + "\n"
	if left := tokenRE.FindString(text); left != "" {
		return "", fmt.Errorf("%s: placeholder %s left in the template", id(obj), left)
	}
	return text, nil
}

func (t *tokens) expandLine(line string) string {
	for _, tok := range tokenRE.FindAllString(line, -1) {
		if f, ok := t.block[tok]; ok {
			return f(line[:len(line)-len(strings.TrimLeft(line, " "))])
		}
		if e, ok := t.inline[tok]; ok {
			line = strings.ReplaceAll(line, tok, e)
		}
	}
	return line
}

// optional is a block that writes `key:` and the value v (a values path) only when v is set.
func optional(key, v string) func(string) string {
	return func(ind string) string {
		return fmt.Sprintf("{{- with %s }}\n%s%s:\n%s  {{- toYaml . | nindent %d }}\n{{- end }}", v, ind, key, ind, len(ind)+2)
	}
}

// optionalScalar is a block that writes `key: value`, v (a values path) quoted, only when v is
// set.
func optionalScalar(key, v string) func(string) string {
	return func(ind string) string {
		return fmt.Sprintf("{{- with %s }}\n%s%s: {{ . | quote }}\n{{- end }}", v, ind, key)
	}
}

// listItems is a block that writes the items of the list v (a values path) at the line's place.
func listItems(v string) func(string) string {
	return func(ind string) string {
		return fmt.Sprintf("{{- with %s }}{{ toYaml . | nindent %d }}{{- end }}", v, len(ind))
	}
}

// replaceNamespace replaces the namespace ns in every string of v (keys excepted) with a
// placeholder for the release's namespace.
func replaceNamespace(v any, ns, tok string) any {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			v[k] = replaceNamespace(v[k], ns, tok)
		}
	case []any:
		for i := range v {
			v[i] = replaceNamespace(v[i], ns, tok)
		}
	case string:
		return strings.ReplaceAll(v, ns, tok)
	}
	return v
}

// yamlScalar is s as a YAML scalar, quoted when it must be.
func yamlScalar(v any) string {
	raw, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	return strings.TrimSuffix(string(raw), "\n")
}
