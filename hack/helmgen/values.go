package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// value is one key of values.yaml: a leaf with a default, or a map of children. values.yaml,
// values.schema.json and the README's table come from one tree of them.
type value struct {
	key      string
	doc      string
	def      any
	schema   object // of a leaf; inferred from def when nil
	children []value
}

func valueTree(f *facts) []value {
	vals := []value{
		{key: "image", doc: "The hub's container image.", children: []value{
			{key: "repository", def: f.repository, doc: "Repository of the image, without tag (config/default's)."},
			{key: "tag", def: "", doc: fmt.Sprintf("Tag of the image; empty: the chart's appVersion (%s, the tag config/default's `images:` sets).", f.appVersion)},
			{key: "digest", def: f.digest, doc: "Digest (sha256:...) to pin the image by; when set, it is used instead of the tag."},
			{key: "pullPolicy", def: f.pullPolicy, schema: object{"type": "string", "enum": []string{"", "Always", "IfNotPresent", "Never"}},
				doc: "imagePullPolicy of the hub's container; empty: Kubernetes' default (Always for :latest, IfNotPresent otherwise), as config/default."},
		}},
		{key: "imagePullSecrets", def: orEmpty(f.pod["imagePullSecrets"], []any{}),
			doc: "Secrets of the release's namespace to pull the image with, as in a pod spec: [{name: ...}]."},
		{key: "replicaCount", def: f.replicas, schema: object{"type": "integer", "minimum": 0}, doc: fmt.Sprintf(
			"Replicas of the hub (config/default: %v). With leader election (sharded: false) one replica reconciles and the "+
				"others stand by to take over within the lease duration. With sharded: true they share the members: "+
				"config/sharded runs %v, the recommended count (set it: --set sharded=true,replicaCount=%v).",
			f.replicas, f.shardedReplicas, f.shardedReplicas)},
		{key: "sharded", def: false, doc: fmt.Sprintf(
			"false: the replicas elect a leader (%s, as config/default). true: they run sharded (%s, as config/sharded): each "+
				"member is reconciled by exactly one live replica, and a dead replica's members are taken over by the others. "+
				"The hub refuses both flags at once: pass neither in extraArgs.", f.leaderArg, f.shardedArg)},
		{key: "resources", def: orEmpty(f.resources, object{}), doc: "Resources of the hub's container (config/default's). " +
			"Memory grows with the members and the objects their caches hold; no CPU limit, so that a resync across many members is not throttled."},
		{key: "podDisruptionBudget", doc: fmt.Sprintf("The PodDisruptionBudget %s (config/sharded's).", f.pdb), children: []value{
			{key: "enabled", def: nil, schema: object{"type": []string{"boolean", "null"}},
				doc: "null: created when sharded is true, as config/sharded (and not with leader election, as config/default); true or false: always or never."},
			{key: "maxUnavailable", def: f.maxUnavailable, schema: object{"type": []string{"integer", "string"}},
				doc: "Replicas voluntary disruptions (drains, node upgrades) may take down at once: a number or a percentage."},
		}},
		{key: "metrics", doc: "The hub's Prometheus metrics.", children: []value{
			{key: "service", doc: fmt.Sprintf("The Service %s, whose endpoints are every replica's metrics (config/default's).", f.metricsService), children: []value{
				{key: "enabled", def: true, doc: "Create the Service."},
				{key: "port", def: f.metricsPort, schema: object{"type": "integer", "minimum": 1, "maximum": 65535},
					doc: fmt.Sprintf("Port of the Service; its targetPort is the container's port named %s.", f.metricsPortName)},
			}},
		}},
	}
	vals = append(vals, monitorValueTree(f)...)
	return append(vals, podValueTree(f)...)
}

// podValueTree are the values of the hub's container arguments, ServiceAccount and pods.
func podValueTree(f *facts) []value {
	stringMap := object{"type": "object", "additionalProperties": object{"type": "string"}}
	return []value{
		{key: "logLevel", def: "", schema: object{"type": []string{"string", "integer"}, "pattern": "^(|debug|info|error|panic|[1-9][0-9]*)$", "minimum": 1},
			doc: fmt.Sprintf("The hub's log level, its flag %s: debug, info, error, panic, or an integer above 0 for more verbose "+
				"levels (2 shows the Kubernetes client's V(2) lines); empty: not passed, the hub's default (info), as config/default.", f.logFlag)},
		{key: "extraArgs", def: []any{}, schema: object{"type": "array", "items": object{"type": "string"}},
			doc: fmt.Sprintf("Arguments appended to the hub's (`hub run --help` lists them; of a flag given twice, the last counts), for example "+
				"[--probe-interval=30s]. Rendering fails on %s with sharded: true, and on %s without: set sharded instead.", f.leaderArg, f.shardedArg)},
		{key: "serviceAccount", doc: fmt.Sprintf("The ServiceAccount %s the hub's pods run as (config/default's).", f.serviceAccount), children: []value{
			{key: "annotations", def: object{}, schema: stringMap,
				doc: "Annotations of the ServiceAccount, for example a cloud's workload identity (eks.amazonaws.com/role-arn: ...)."},
		}},
		{key: "podAnnotations", def: object{}, schema: stringMap, doc: "Annotations of the hub's pods."},
		{key: "podLabels", def: object{}, schema: stringMap, doc: fmt.Sprintf(
			"Labels added to the hub's pods (not to the Deployment's selector, whose %s they may not set).", strings.Join(f.selector, ", "))},
		{key: "priorityClassName", def: orEmpty(f.pod["priorityClassName"], ""),
			doc: "priorityClassName of the hub's pods, a PriorityClass of the cluster's; empty: none (the cluster's default), as config/default."},
		{key: "nodeSelector", def: orEmpty(f.pod["nodeSelector"], object{}), doc: "nodeSelector of the hub's pods."},
		{key: "tolerations", def: orEmpty(f.pod["tolerations"], []any{}), doc: "Tolerations of the hub's pods."},
		{key: "affinity", def: orEmpty(f.pod["affinity"], object{}),
			doc: "Affinity of the hub's pods; config/default's spreads the replicas over nodes, so that one node's failure leaves the others."},
		{key: "topologySpreadConstraints", def: orEmpty(f.pod["topologySpreadConstraints"], []any{}),
			doc: "topologySpreadConstraints of the hub's pods, as in a pod spec, for example to spread the replicas over zones " +
				"(labelSelector: {matchLabels: {app.kubernetes.io/name: configbundle-hub}})."},
	}
}

// monitorValueTree are the values of the monitoring objects config/prometheus holds.
func monitorValueTree(f *facts) []value {
	var vals []value
	if slices.Contains(f.monitors, "ServiceMonitor") {
		reader := ""
		if f.metricsReader != "" {
			reader = fmt.Sprintf(" Prometheus's ServiceAccount needs the ClusterRole %s bound to it to scrape.", f.metricsReader)
		}
		vals = append(vals, value{key: "serviceMonitor", doc: "The Prometheus Operator ServiceMonitor " + chartName + " (config/prometheus's).", children: []value{
			{key: "enabled", def: false, doc: "Create it; needs the monitoring.coreos.com CRDs and metrics.service.enabled." + reader},
			{key: "labels", def: object{}, doc: "Labels added to it, for a Prometheus's serviceMonitorSelector (kube-prometheus-stack's selects the label release=NAME, NAME its own release)."},
		}})
	}
	if slices.Contains(f.monitors, "PrometheusRule") {
		vals = append(vals, value{key: "prometheusRule", doc: "The Prometheus Operator PrometheusRule " + chartName + " (config/prometheus's alerts).", children: []value{
			{key: "enabled", def: false, doc: "Create it; needs the monitoring.coreos.com CRDs."},
			{key: "labels", def: object{}, doc: "Labels added to it, for a Prometheus's ruleSelector (kube-prometheus-stack's selects the label release=NAME, NAME its own release)."},
		}})
	}
	return vals
}

// orEmpty is v, or empty when v is nil.
func orEmpty(v, empty any) any {
	if v == nil {
		return empty
	}
	return v
}

// wrapText splits s into lines of at most width characters.
func wrapText(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

func valuesYAML(vals []value) string {
	var b strings.Builder
	b.WriteString("# " + generatedBy + "\n#\n# Values of the chart " + chartName +
		"; the defaults render config/default's objects (README.md has the table).\n")
	writeValues(&b, vals, "")
	return b.String()
}

func writeValues(b *strings.Builder, vals []value, indent string) {
	for _, v := range vals {
		if indent == "" {
			b.WriteString("\n")
		}
		for _, l := range wrapText(v.doc, 100-len(indent)-2) {
			b.WriteString(indent + "# " + l + "\n")
		}
		if v.children != nil {
			b.WriteString(indent + v.key + ":\n")
			writeValues(b, v.children, indent+"  ")
			continue
		}
		text := yamlScalar(v.def)
		if rv := reflect.ValueOf(v.def); !v.isBlock(rv) {
			b.WriteString(indent + v.key + ": " + text + "\n")
			continue
		}
		b.WriteString(indent + v.key + ":\n")
		for _, l := range strings.Split(text, "\n") {
			b.WriteString(indent + "  " + l + "\n")
		}
	}
}

// isBlock tells whether the default is a non-empty map or list, written as a YAML block.
func (v value) isBlock(rv reflect.Value) bool {
	return rv.IsValid() && (rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice) && rv.Len() > 0
}

func valuesSchema(vals []value) (string, error) {
	s := schemaOf(vals)
	// Helm passes `global` to every chart.
	s["properties"].(object)["global"] = object{"type": "object"}
	s["title"] = "Values of the Helm chart " + chartName + " (generated by hack/helmgen)"
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", err
	}
	return string(raw) + "\n", nil
}

// schemaOf is the JSON schema of a map of values: unknown keys are errors, so that a misspelt
// --set fails instead of being ignored.
func schemaOf(vals []value) object {
	props := object{}
	for _, v := range vals {
		var s object
		switch {
		case v.children != nil:
			s = schemaOf(v.children)
		case v.schema != nil:
			s = maps.Clone(v.schema)
		default:
			s = inferSchema(v.def)
		}
		s["description"] = v.doc
		props[v.key] = s
	}
	return object{"type": "object", "properties": props, "additionalProperties": false}
}

func inferSchema(def any) object {
	switch d := def.(type) {
	case bool:
		return object{"type": "boolean"}
	case float64:
		if d == float64(int64(d)) {
			return object{"type": "integer"}
		}
		return object{"type": "number"}
	case string:
		return object{"type": "string"}
	case []any:
		return object{"type": "array"}
	case map[string]any:
		return object{"type": "object"}
	}
	return object{}
}
