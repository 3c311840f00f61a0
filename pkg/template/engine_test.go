package template

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"text/template/parse"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// maxRenderAlloc bounds what one rendering may allocate, garbage included: the string-making
// built-ins' budget, what fmt and strconv allocate beside what they return (their buffers grow by
// doubling), and the parse of values whose code is bounded by MaxTemplateCodeBytes.
const maxRenderAlloc = 3*RenderBudgetBytes + 16<<20

// bomb is a hostile template, rendered as the message unless data is set.
type bomb struct {
	name    string
	message string
	data    map[string]string
	// annotations, if set, are the template's annotations.
	annotations map[string]string
	// renders is set if the bomb renders (bounded) rather than fails.
	renders bool
	// labeled renders it for a member of 100 labels.
	labeled bool
}

// labeledMember has 100 labels.
var labeledMember = Member{Name: "member-b", Labels: manyLabels(100)}

func manyLabels(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("label-%03d", i)] = "value"
	}
	return m
}

func bombs() []bomb {
	pad := `{{printf "%01000000d" 1}}`
	big := `{{$x := printf "%0900000s" "<"}}`
	manyData := map[string]string{}
	for i := range 48 {
		manyData[fmt.Sprintf("K%02d", i)] = `{{printf "%032000d" 1}}`
	}
	return []bomb{
		{name: "printf padding repeated", message: strings.Repeat(pad, 100)},
		{name: "printf padding under the budget, over the message limit", message: strings.Repeat(`{{printf "%0600000d" 1}}`, 2)},
		{name: "nested printf of printf", message: `{{printf "%s%s%s%s" ` + strings.Repeat(`(printf "%01000000d" 1) `, 4) + `}}`},
		{name: "nested printf, widths on widths", message: `{{printf "%01000000s" (printf "%01000000s" (printf "%01000000s" (printf "%01000000s" "x")))}}`},
		{name: "%[1]s reusing a big variable", message: big + `{{printf "` + strings.Repeat("%[1]s", 50) + `" $x}}`},
		{name: "a big variable printed again and again", message: big + strings.Repeat("{{$x}}", 100)},
		{name: "%*d with a huge argument", message: `{{printf "%*d" 100000000 1}}`, renders: true},
		{name: "%*d many times at the largest width", message: `{{printf "` + strings.Repeat("%*d", 10) + `"` + strings.Repeat(" 1000000 1", 10) + `}}`},
		{name: "width applied to each label", message: `{{printf "%1000000v" .Cluster.Labels}}`, labeled: true},
		{name: "width applied to each field", message: `{{printf "%01000000v" .}}`, labeled: true},
		{name: "bad verb of each label", message: `{{printf "%d%d%d%d%d%d%d%d" .Cluster.Labels .Cluster.Labels .Cluster.Labels .Cluster.Labels .Cluster.Labels .Cluster.Labels .Cluster.Labels .Cluster.Labels}}`, labeled: true, renders: true},
		{name: "float precision", message: strings.Repeat(`{{printf "%.1000000f" 1.0}}`, 10)},
		{name: "float width and precision", message: `{{printf "%01000000.1000000f" 1e300}}`},
		{name: "complex precision, both parts", message: `{{printf "%.1000000f%.1000000f" 1i 1i}}`},
		{name: "Go syntax of control characters", message: `{{printf "%#v%#v%#v" "` + strings.Repeat(`\x01`, 300000) + `" "" ""}}`},
		{name: "%x of a big string", message: big + `{{printf "% #x" $x}}`},
		{name: "html of big strings", message: big + `{{html $x $x}}`},
		{name: "js of a big string", message: big + `{{js $x}}`},
		{name: "urlquery of big strings", message: big + `{{urlquery $x}}{{urlquery $x}}`},
		{name: "println of many big values", message: big + `{{println $x $x $x $x $x}}`},
		{name: "deep paren nesting", message: "{{" + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + "}}"},
		{name: "deep paren nesting within the code bound", message: "{{" + strings.Repeat("(", 8000) + "1" + strings.Repeat(")", 8000) + "}}", renders: true},
		{name: "deep if nesting", message: strings.Repeat("{{if 1}}", MaxTemplateActions) + strings.Repeat("{{end}}", MaxTemplateActions)},
		{name: "deep if nesting within the action bound", message: strings.Repeat("{{if 1}}", 500) + "x" + strings.Repeat("{{end}}", 500), renders: true},
		{name: "many operands", message: "{{print" + strings.Repeat(" 1", 500000) + "}}"},
		{name: "many string operands", message: "{{print" + strings.Repeat(` "a"`, 200000) + "}}"},
		{name: "a big string literal", message: `{{print "` + strings.Repeat("a", configbundlev1alpha1.MaxMessageBytes-20) + `"}}`, renders: true},
		{name: "output over the message limit", message: strings.Repeat("x", configbundlev1alpha1.MaxMessageBytes) + "{{.Cluster.Name}}"},
		{name: "every data value at its limit, over the budget together", message: `{{printf "%01000000d" 1}}`, data: manyData},
		{name: "the member's labels printed in every annotation", message: "ok", annotations: manyValues(64, strings.Repeat("{{.}}", 180)), labeled: true},
		{name: "every data value printf'd, the budget shared", message: "ok", data: map[string]string{
			"A": strings.Repeat(`{{printf "%030000d" 1}}`, 1), "B": big + "{{len $x}}", "C": big + "{{len $x}}", "D": big + "{{len $x}}", "E": big + "{{len $x}}", "F": big + "{{len $x}}",
		}},
	}
}

// TestRenderBombs: a hostile author's template fails to render, or renders within its limits, and
// one rendering allocates at most maxRenderAlloc, garbage included.
func TestRenderBombs(t *testing.T) {
	for _, b := range bombs() {
		t.Run(b.name, func(t *testing.T) {
			d := goTemplate(b.message, b.data, nil, b.annotations)
			var r Rendered
			var err error
			m := euMember
			if b.labeled {
				m = labeledMember
			}
			alloc := allocated(func() {
				if err = d.Check(); err == nil {
					r, err = d.Render(m)
				}
			})
			switch {
			case b.renders && err != nil:
				t.Errorf("render failed: %.300v", err)
			case !b.renders && err == nil:
				t.Errorf("rendered %d bytes of message, want an error", len(r.Spec.Message))
			}
			if alloc > maxRenderAlloc {
				t.Errorf("Check and Render allocated %.1f MiB, more than %.1f MiB (error: %.200v)", mib(alloc), mib(maxRenderAlloc), err)
			}
			t.Logf("allocated %.2f MiB; error: %.160v", mib(alloc), err)
		})
	}
}

// allocated returns the bytes allocated while f runs (the suite's manager allocates meanwhile
// too: a little more, never less).
func allocated(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// TestPrintfBound: printfBound is at least the length of fmt.Sprintf for every format of a corpus
// of flags, widths, precisions, argument indexes and verbs, over arguments of every kind a
// template can pass, missing and extra ones included.
func TestPrintfBound(t *testing.T) {
	argSets := [][]any{
		nil,
		{"eu"},
		{"a\x01\xff\u2028\U0010ffff \"q\"", -42, 1e300},
		{3.5, complex(1e300, -1e-300), int64(math.MinInt64), true, nil},
		{map[string]string{"region": "eu", "q\"": "\x00"}, templateData{Cluster: euMember}, euMember, &euMember},
		{40, 7, "xyz", math.NaN(), math.Inf(-1), []any{"a", 1}, uint64(math.MaxUint64)},
		{strings.Repeat("\x01", 1000), 300, 301, -5},
		{1000000, 1.5, complex(1e300, 1), "big"},
		{manyLabels(50), templateData{Cluster: labeledMember}, 1000000},
	}
	checked := 0
	for _, format := range printfFormats() {
		for _, args := range argSets {
			got, bound := fmt.Sprintf(format, args...), printfBound(format, args)
			checked++
			if bound < len(got) {
				t.Errorf("printfBound(%q, %v) = %d, fmt.Sprintf made %d bytes", format, args, bound, len(got))
			}
		}
	}
	t.Logf("%d formats and arguments checked", checked)
}

// printfFormats are one-verb formats of every combination of flags, width, precision, argument
// index and verb, some doubled, and a few of several verbs.
func printfFormats() []string {
	var formats []string
	for _, flags := range []string{"", "+", "-", "#", " 0", "+#"} {
		for _, width := range []string{"", "5", "40", "*", "[2]*"} {
			for _, prec := range []string{"", ".0", ".3", ".*", ".[3]*", ".30"} {
				for _, index := range []string{"", "[3]", "[x]"} {
					for _, verb := range []string{"v", "d", "q", "x", "X", "b", "o", "O", "f", "e", "g", "s", "U", "c", "t", "T", "p", "z", "%"} {
						f := "%" + flags + width + prec + index + verb
						formats = append(formats, f, "a"+f+"b"+f)
					}
				}
			}
		}
	}
	// The largest widths and precisions, once each: an argument 1000000 is the first of a set.
	for _, f := range []string{"%1000000d", "%99999999d", "%.1000000f", "%01000000.1000000f", "%#.1000000g", "%[4]*s", "%*[2]f", "%.*[3]f", "%-1000000.1000000v"} {
		formats = append(formats, f, f+f)
	}
	return append(formats, "", "%", "%!", "%[9]d", "%[1]v %[9]v", "% -#x", "%[", "%[2", "100%", "%[2]d %[1]d %d %d", "%v %v %v %v %v %v %v %v", "%-10.3[2]*s", "%.*[1]d")
}

// TestScanVerb: what scanVerb reads of a verb.
func TestScanVerb(t *testing.T) {
	for _, tc := range []struct {
		format string
		argi   int
		want   verb
		end    int
	}{
		{"%d", 0, verb{factor: 1, arg: 0, next: 1}, 1},
		{"%5.3d", 2, verb{width: 5, precision: 3, factor: 1, arg: 2, next: 3}, 4},
		{"%-05s", 0, verb{width: 5, factor: 1, arg: 0, next: 1}, 4},
		{"%+q", 0, verb{factor: 8, arg: 0, next: 1}, 2},
		{"%#v", 0, verb{factor: 8, arg: 0, next: 1}, 2},
		{"%x", 1, verb{factor: 8, arg: 1, next: 2}, 1},
		{"%*d", 0, verb{width: maxFmtNumber, factor: 1, arg: 1, next: 2}, 2},
		{"%.*f", 0, verb{precision: maxFmtNumber, factor: 1, arg: 1, next: 2}, 3},
		{"%[3]d", 0, verb{factor: 1, arg: 2, next: 3}, 4},
		{"%[2]*[1]d", 0, verb{width: maxFmtNumber, factor: 1, arg: 0, next: 1}, 8},
		{"%99999999999d", 0, verb{width: maxFmtNumber, factor: 1, arg: 0, next: 1}, 12},
		{"%%", 4, verb{arg: -1, next: 4}, 1},
		{"%é", 0, verb{factor: 1, arg: 0, next: 1}, 2},
	} {
		v, end := scanVerb(tc.format, 1, tc.argi)
		if v != tc.want || end != tc.end {
			t.Errorf("scanVerb(%q, 1, %d) = %+v, %d; want %+v, %d", tc.format, tc.argi, v, end, tc.want, tc.end)
		}
	}
}

// TestCodeBytes: the bytes of a value's actions, their literals' and comments' contents apart,
// never less than the lexer sees.
func TestCodeBytes(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{"no actions", 0},
		{"{{ .Cluster.Name }}", 15},
		{"a{{1}}b{{2}}c", 2},
		{`{{ print "}} 1 1 1" }}`, 9},
		{"{{ print `}}\n1 1` }}", 9},
		{`{{ print "a\"}}" }}`, 9},
		{`{{ print '}' }}`, 9},
		{"{{/* }} 1 1 1 */}}", 0},
		{"{{- /* x */ -}}", 2},
		{`{{ print "unterminated`, 8},
		{"{{ 1 1 1", 6},
	} {
		if got := codeBytes(tc.src); got != tc.want {
			t.Errorf("codeBytes(%q) = %d, want %d", tc.src, got, tc.want)
		}
	}
}

// TestParsedValuesCache: a revision's values are parsed once and shared by the renderings of
// every member, in parallel (the race detector watches), and the cache empties itself rather than
// hold more than maxCachedBytes (its estimate of the trees' memory).
func TestParsedValuesCache(t *testing.T) {
	c := &treeCache{trees: map[treeKey]*parse.Tree{}}
	first, err := c.parse("h1", "spec.template.spec.message", "{{ .Cluster.Name }}")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := c.parse("h1", "spec.template.spec.message", "{{ .Cluster.Name }}")
	if again != first {
		t.Error("a value of the same revision and field was parsed again")
	}
	if other, _ := c.parse("h2", "spec.template.spec.message", "{{ .Cluster.Name }}"); other == first {
		t.Error("another revision's value came from the cache")
	}
	if uncached, _ := c.parse("", "spec.template.spec.message", "{{ .Cluster.Name }}"); uncached == first {
		t.Error("a value without a revision came from the cache")
	}
	big := strings.Repeat("x", maxCachedBytes/2+1)
	for _, h := range []string{"b1", "b2"} {
		if _, err := c.parse(h, "spec.template.spec.message", big); err != nil {
			t.Fatal(err)
		}
		if c.bytes > maxCachedBytes {
			t.Fatalf("the cache holds %d bytes, more than %d", c.bytes, maxCachedBytes)
		}
	}
	if _, ok := c.trees[treeKey{hash: "h1", field: "spec.template.spec.message"}]; ok {
		t.Error("the cache was not emptied when full")
	}

	d := benchDefinition(hubv1alpha1.TemplateEngineGoTemplate)
	hash := Hash(d)
	want, err := d.Render(euMember)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				got, err := d.RenderCached(euMember, hash)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("render from the cache = %v, %v; want %v", got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
