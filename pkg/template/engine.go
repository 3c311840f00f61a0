package template

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// What a FleetBundle's GoTemplate may make the hub do is bounded, so that no FleetBundle can make
// the hub do unbounded work or hold unbounded memory:
//   - a template is only text/template: no function but its built-ins, and a template reads only
//     the data it is given (.Cluster.Name and .Cluster.Labels), never a file, the network or the
//     environment;
//   - range, define, template and block are refused, so that execution visits each node of the
//     template at most once: its time is linear in the template's size;
//   - a value holds at most MaxTemplateActions actions ("{{"), which bounds the nesting of if
//     and with, and the parser bounds the nesting of parentheses;
//   - each value's output is bounded (the limit of its field), and the built-ins that make new
//     strings (print, printf, println, html, js, urlquery) draw on one budget per rendering,
//     RenderBudgetBytes, checked before they allocate: printf's padding and precision count.

// MaxTemplateActions is the most actions ("{{") a templated value may hold.
const MaxTemplateActions = 1000

// MaxTemplateCodeBytes is the most bytes the actions of a definition's templated values may hold
// in all, the contents of their string literals and comments apart: the parser and the execution
// of a pipeline allocate a few hundred bytes per token ("{{print 1 1 1 ...}}"), so that this
// bounds what rendering a definition for one member costs, whatever the number of its values,
// before anything is parsed.
const MaxTemplateCodeBytes = 16 << 10

// RenderBudgetBytes is the most bytes the string-making built-ins may produce in all, in the
// rendering of one bundle for one member.
const RenderBudgetBytes = 4 << 20

// errRenderBudget is the error of a built-in that would exceed the rendering's budget.
var errRenderBudget = fmt.Errorf("the template's functions would produce more than %d bytes in all", RenderBudgetBytes)

// builtinNames are text/template's built-in functions: the only ones a template may call. The
// parser knows a function by a non-nil value: with nil, every call is "not defined".
var builtinNames = map[string]any{
	"and": true, "call": true, "html": true, "index": true, "slice": true, "js": true, "len": true,
	"not": true, "or": true, "print": true, "printf": true, "println": true, "urlquery": true,
	"eq": true, "ge": true, "gt": true, "le": true, "lt": true, "ne": true,
}

// parseValue parses one templated value, named by its field, and refuses what a template may not
// do (the error names the field).
func parseValue(field, src string) (*parse.Tree, error) {
	if n := strings.Count(src, "{{"); n > MaxTemplateActions {
		return nil, fmt.Errorf("%s: %d actions, more than the %d a templated value may hold", field, n, MaxTemplateActions)
	}
	if n := codeBytes(src); n > MaxTemplateCodeBytes {
		return nil, fmt.Errorf("%s: its actions hold %d bytes besides their strings, more than the %d a templated value may hold", field, n, MaxTemplateCodeBytes)
	}
	trees, err := parse.Parse(field, src, "{{", "}}", builtinNames)
	if err != nil {
		return nil, err // text/template's errors start with "template: <field>:<line>:"
	}
	for name := range trees {
		if name != field {
			return nil, fmt.Errorf("%s: define and block are not allowed in a template", field)
		}
	}
	tree := trees[field]
	if tree == nil { // an empty value
		tree = &parse.Tree{Name: field, Root: &parse.ListNode{NodeType: parse.NodeList}}
	}
	if err := refused(field, tree.Root); err != nil {
		return nil, err
	}
	return tree, nil
}

// parsedValues holds the parsed values of the definitions rendered lately, so that a definition's
// values are parsed once, not once per member (a parsed tree is only read by its executions, which
// may run in parallel).
var parsedValues = &treeCache{trees: map[treeKey]*parse.Tree{}}

// maxCachedBytes bounds what parsedValues holds, as treeCost counts it.
const maxCachedBytes = 16 << 20

// treeCost estimates the memory of a value's parsed tree: its text, which text nodes copy, and
// some 64 bytes of nodes per byte of code (a value of 16 KiB of dense code, {{and 1 1 ...}},
// parses to about 900 KiB).
func treeCost(src string) int {
	return len(src) + 64*codeBytes(src)
}

// treeCache is a cache of parsed values, emptied when it would hold more than maxCachedBytes.
type treeCache struct {
	mu    sync.Mutex
	trees map[treeKey]*parse.Tree
	bytes int
}

// treeKey identifies a value: the Hash of its definition, and its field.
type treeKey struct{ hash, field string }

// parse returns the tree of the value src of field in the definition of hash, parsing it if the
// cache does not hold it; hash "" is never cached. Errors are not cached: a definition that does
// not parse is never rendered but by `hub render` and the tests.
func (c *treeCache) parse(hash, field, src string) (*parse.Tree, error) {
	key := treeKey{hash: hash, field: field}
	if hash != "" {
		c.mu.Lock()
		tree, ok := c.trees[key]
		c.mu.Unlock()
		if ok {
			return tree, nil
		}
	}
	tree, err := parseValue(field, src)
	cost := treeCost(src)
	if err != nil || hash == "" || cost > maxCachedBytes {
		return tree, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.trees[key]; ok { // parsed meanwhile by another worker
		return tree, nil
	}
	if c.bytes+cost > maxCachedBytes {
		clear(c.trees)
		c.bytes = 0
	}
	c.trees[key] = tree
	c.bytes += cost
	return tree, nil
}

// codeBytes counts the bytes of the actions of src, the contents of their string literals and
// comments apart, scanning them as text/template's lexer does; where a literal it cannot end
// would confuse it, it counts more, never less.
func codeBytes(src string) int {
	n := 0
	for {
		start := strings.Index(src, "{{")
		if start < 0 {
			return n
		}
		src = src[start+2:]
		if c := strings.TrimPrefix(src, "- "); strings.HasPrefix(c, "/*") {
			if end := strings.Index(c, "*/"); end >= 0 {
				src = c[end+2:]
			}
		}
		for len(src) > 0 && !strings.HasPrefix(src, "}}") {
			n++
			if q := src[0]; q == '"' || q == '`' || q == '\'' {
				src = src[literalEnd(src, q):]
				continue
			}
			src = src[1:]
		}
		src = strings.TrimPrefix(src, "}}")
	}
}

// literalEnd returns the index after the string, raw string or character literal at the start
// of src, quoted by q: after its closing quote, at a newline that ends it in error, or at the
// end of src.
func literalEnd(src string, q byte) int {
	for i := 1; i < len(src); i++ {
		switch {
		case src[i] == q:
			return i + 1
		case q == '`':
		case src[i] == '\\':
			i++
		case src[i] == '\n':
			return i
		}
	}
	return len(src)
}

// refused returns an error naming the first action of node a template may not use.
func refused(field string, node parse.Node) error {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := refused(field, c); err != nil {
				return err
			}
		}
	case *parse.IfNode:
		return refusedBranch(field, &n.BranchNode)
	case *parse.WithNode:
		return refusedBranch(field, &n.BranchNode)
	case *parse.RangeNode:
		return fmt.Errorf("%s: range is not allowed in a template", field)
	case *parse.TemplateNode:
		return fmt.Errorf("%s: template and block are not allowed in a template", field)
	}
	return nil
}

func refusedBranch(field string, b *parse.BranchNode) error {
	if err := refused(field, b.List); err != nil {
		return err
	}
	return refused(field, b.ElseList)
}

// execValue executes a parsed value with data, producing at most limit bytes, its built-ins
// drawing on budget.
func execValue(tree *parse.Tree, data any, limit int, budget *renderBudget) (string, error) {
	t, err := template.New(tree.Name).Option("missingkey=error").Funcs(budget.funcs()).AddParseTree(tree.Name, tree)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tree.Name, err)
	}
	w := &limitedBuilder{limit: limit}
	if err := t.Execute(w, data); err != nil {
		if errors.Is(err, errOutputTooLarge) {
			return "", fmt.Errorf("%s: the rendered value is longer than the %d bytes left for it", tree.Name, limit)
		}
		return "", err // "template: <field>:<line>:<col>: executing ..."
	}
	return w.String(), nil
}

// errOutputTooLarge stops an execution whose output passes its limit.
var errOutputTooLarge = errors.New("output too large")

// limitedBuilder is a strings.Builder that refuses to grow past limit bytes.
type limitedBuilder struct {
	strings.Builder
	limit int
}

func (w *limitedBuilder) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.limit {
		return 0, errOutputTooLarge
	}
	return w.Builder.Write(p)
}

// renderBudget is what the string-making built-ins of one rendering may still produce.
type renderBudget struct{ left int }

func newRenderBudget() *renderBudget { return &renderBudget{left: RenderBudgetBytes} }

// funcs are the built-ins that make strings, bounded by the budget; the others are
// text/template's own.
func (b *renderBudget) funcs() template.FuncMap {
	return template.FuncMap{
		"print": func(args ...any) (string, error) {
			return b.spend(printBound(args), func() string { return fmt.Sprint(args...) })
		},
		"println": func(args ...any) (string, error) {
			return b.spend(printBound(args)+len(args)+1, func() string { return fmt.Sprintln(args...) })
		},
		"printf": func(format string, args ...any) (string, error) {
			return b.spend(printfBound(format, args), func() string { return fmt.Sprintf(format, args...) })
		},
		"html": func(args ...any) (string, error) {
			return b.spend(6*printBound(args), func() string { return template.HTMLEscaper(args...) })
		},
		"js": func(args ...any) (string, error) {
			return b.spend(6*printBound(args), func() string { return template.JSEscaper(args...) })
		},
		"urlquery": func(args ...any) (string, error) {
			return b.spend(3*printBound(args), func() string { return template.URLQueryEscaper(args...) })
		},
	}
}

// spend makes a string of at most bound bytes if the budget allows it, and charges its length.
func (b *renderBudget) spend(bound int, make func() string) (string, error) {
	if bound > b.left {
		return "", errRenderBudget
	}
	s := make()
	b.left -= len(s)
	return s, nil
}

// verbOverhead bounds what a verb prints besides its argument: a number's digits and sign, a
// float's exponent, the %!verb(type=...) of a wrong or missing argument.
const verbOverhead = 400

// printBound bounds the length of fmt.Sprint of args.
func printBound(args []any) int {
	n := 0
	for _, a := range args {
		n += sizeOf(reflect.ValueOf(a), 0) + verbOverhead
	}
	return n
}

// floatPrecisionCost is what a digit of a float's precision costs: strconv appends the digits one
// at a time (growing its buffer by doubling) and fmt copies them, about four bytes allocated
// for each byte printed.
const floatPrecisionCost = 4

// printfBound bounds the length of fmt.Sprintf(format, args...): the format, each verb's
// width, precision and argument (times what its verb can make of each byte: %q four, %b eight),
// and every argument again for fmt's %!(EXTRA ...).
func printfBound(format string, args []any) int {
	n := len(format) + printBound(args)
	argi := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		v, end := scanVerb(format, i+1, argi)
		i, argi = end, v.next
		arg, each := 0, v.width+v.precision+verbOverhead
		if v.arg >= 0 && v.arg < len(args) {
			a := reflect.ValueOf(args[v.arg])
			arg = sizeOf(a, 0)
			switch a.Kind() {
			case reflect.Float32, reflect.Float64:
				each = v.width + floatPrecisionCost*v.precision + verbOverhead
			case reflect.Complex64, reflect.Complex128: // each part padded, to each its precision
				each = 2 * (v.width + floatPrecisionCost*v.precision + verbOverhead)
			default: // a map's keys and values, a struct's fields: each padded, each its %!verb
				each *= leaves(a, 0)
			}
		}
		n += each + v.factor*arg
	}
	return n
}

// verb is what printfBound needs of one verb of a format.
type verb struct {
	width, precision int
	factor           int // bytes of output per byte of argument
	arg              int // the index of its argument
	next             int // the index of the argument the next verb takes
}

// maxFmtNumber is the largest width or precision fmt honours (a larger one is %!(BADWIDTH)).
const maxFmtNumber = 1e6

// scanVerb reads the verb of format that starts after a '%' at i, the next argument being argi;
// it returns the verb and the index of its last byte.
func scanVerb(format string, i, argi int) (verb, int) {
	v := verb{factor: 1, arg: argi}
	sharp := false
	for ; i < len(format) && strings.IndexByte("+-# 0", format[i]) >= 0; i++ {
		if format[i] != '-' && format[i] != '0' {
			v.factor = 2 // %#q, % x, %+q print more per byte
		}
		sharp = sharp || format[i] == '#'
	}
	v.width = v.number(format, &i)
	if i < len(format) && format[i] == '.' {
		i++
		v.precision = v.number(format, &i)
	}
	v.argIndex(format, &i)
	if i >= len(format) {
		return v, len(format)
	}
	r, size := utf8.DecodeRuneInString(format[i:])
	switch r {
	case '%':
		return verb{arg: -1, next: v.arg}, i + size - 1
	case 'q', 'U':
		v.factor *= 4
	case 'v':
		if sharp { // Go syntax: strings quoted, "\x01" four bytes a byte
			v.factor *= 4
		}
	case 'x', 'X', 'b', 'o', 'O':
		v.factor *= 8 // %b of a string's bytes: eight digits a byte
	}
	v.next = v.arg + 1
	return v, i + size - 1
}

// number reads at *i an optional argument index and a width or precision: digits, or '*' (an
// argument, counted as the largest fmt honours).
func (v *verb) number(format string, i *int) int {
	v.argIndex(format, i)
	if *i < len(format) && format[*i] == '*' {
		*i++
		v.arg++
		return maxFmtNumber
	}
	n := 0
	for ; *i < len(format) && format[*i] >= '0' && format[*i] <= '9'; *i++ {
		n = min(n*10+int(format[*i]-'0'), maxFmtNumber)
	}
	return n
}

// argIndex reads at *i an explicit argument index, [n], if there is one.
func (v *verb) argIndex(format string, i *int) {
	if *i >= len(format) || format[*i] != '[' {
		return
	}
	end := strings.IndexByte(format[*i:], ']')
	if end < 0 {
		return
	}
	if idx, err := strconv.Atoi(format[*i+1 : *i+end]); err == nil && idx >= 1 {
		v.arg = idx - 1
	}
	*i += end + 1
}

// leaves counts the values fmt prints one by one, each with the verb's width and precision, when
// it prints v: a map's keys and values, a struct's fields, a slice's elements, recursively.
func leaves(v reflect.Value, depth int) int {
	if !v.IsValid() || depth > 8 {
		return 1
	}
	n := 0
	switch v.Kind() {
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			n += leaves(it.Key(), depth+1) + leaves(it.Value(), depth+1)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			n += leaves(v.Index(i), depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			n += leaves(v.Field(i), depth+1)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return leaves(v.Elem(), depth+1)
		}
	}
	return max(n, 1)
}

// sizeOf bounds the bytes fmt's %v prints of v, as a count of the bytes of its strings plus a
// little per element; the data of a template is strings, maps of strings and small structs.
func sizeOf(v reflect.Value, depth int) int {
	if !v.IsValid() || depth > 8 {
		return verbOverhead
	}
	switch v.Kind() {
	case reflect.String:
		return v.Len()
	case reflect.Map:
		n := 8
		it := v.MapRange()
		for it.Next() {
			n += sizeOf(it.Key(), depth+1) + sizeOf(it.Value(), depth+1) + 4
		}
		return n
	case reflect.Slice, reflect.Array:
		n := 8
		for i := range v.Len() {
			n += sizeOf(v.Index(i), depth+1) + 4
		}
		return n
	case reflect.Struct:
		n := 8 + len(v.Type().String())
		for i := range v.NumField() {
			n += sizeOf(v.Field(i), depth+1) + len(v.Type().Field(i).Name) + 4
		}
		return n
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return verbOverhead
		}
		return sizeOf(v.Elem(), depth+1) + 8
	}
	return verbOverhead
}
