// Package template renders a FleetBundle's definition for one member: Definition is what a
// revision holds (the template, its templateEngine, its overrides, and what its dataFrom sources
// held, merged by ResolveSources in sources.go and never templated), Render applies the
// overrides that select the member (overrides.go) and, with GoTemplate, executes every value on
// a bounded engine (engine.go: only text/template's built-ins, no range or define, a budget of
// actions, code bytes and output per rendering), then checks the result as the member's API
// server would. Hash identifies a definition's content; the placed bundles carry it. Nothing
// here reads or writes a cluster: package placement turns a rendering into the ConfigBundle it
// places.
package template
