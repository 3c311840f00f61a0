// Package configbundle is the cluster-aware ConfigBundle reconciler.
//
// One Reconciler serves every member cluster of a multicluster-runtime manager: a request names
// the member, and the reconciler works through that member's client and cache only. For each
// ConfigBundle it renders the desired ConfigMap (DesiredConfigMap), compares it with the one in
// the member (Drift), converges (create, update, replace, or restore an immutable bundle's spec),
// and records the outcome once in the bundle's status. The reconciler is level-based: it never
// asks which event woke it, only what the member holds now; it reads that from the member's
// cache, and from the API server where the cache cannot be trusted yet (after an outage, before
// recreating a deleted ConfigMap). What it remembers between reconciles backs up durable facts
// (which write was its own, heals and outcomes its status could not record yet) and is forgotten
// when a member leaves. A heal is counted when, and only when, someone else changed the
// ConfigMap; a ConfigMap healed FightHeals times within FightWindow is reported as a fight.
//
// A bundle with target Secret owns an Opaque Secret through the same path (target.go): the
// reconciler converges a ConfigMap view of it, with the data Options.HubSources resolves the
// bundle's spec.hubSource to; a bundle it cannot resolve is SourceNotFound, and nothing is written.
//
// ConfigureCache sets a member's cache so that ConfigMaps no bundle controls and the hub never
// wrote cost only their metadata skeleton, and only the Secrets the hub publishes are cached.
package configbundle
