// Package fleetbundle holds the few facts about a FleetBundle that placement, rollout, templates
// and tenancy all use, so that none of them imports another for them: the FleetBundleLabel value
// that ties what the hub writes to its FleetBundle (label.go), how a FleetBundle's selectors
// select members (Selects), the short content hash its revisions and renderings carry (Hash),
// and how status messages are kept short (messages.go).
package fleetbundle
