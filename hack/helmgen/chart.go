package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// writeChart replaces the directory out with files; out must not exist, be empty or hold a
// generated chart.
func writeChart(out string, files map[string]string) error {
	entries, err := os.ReadDir(out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		chart, err := os.ReadFile(filepath.Join(out, "Chart.yaml"))
		if err != nil || !bytes.Contains(chart, []byte(generatedBy)) {
			return fmt.Errorf("%s is not empty and holds no generated Chart.yaml: refusing to replace it", out)
		}
		if err := os.RemoveAll(out); err != nil {
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(out, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(files[p]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func chartYAML(f *facts, version string) string {
	return "# " + generatedBy + "\n" +
		"apiVersion: v2\n" +
		"name: " + chartName + "\n" +
		"description: ConfigBundle Hub, the multi-cluster reconciler of ConfigBundles, on its hub cluster (generated from config/default).\n" +
		"type: application\n" +
		"version: " + yamlScalar(version) + "\n" +
		"appVersion: " + yamlScalar(f.appVersion) + "\n"
}

func helpers(f *facts) string {
	return "{{- /* " + generatedBy + " */ -}}\n\n" +
		`{{- /* Helm's standard labels, on the metadata of every object of the chart: never on a selector or a pod
template, so that with default values the objects are config/default's but for these four labels. */}}
{{- define "` + chartName + `.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
{{- end }}

{{- /* The hub's image: repository@digest when a digest is set, else repository:tag (tag default: appVersion). */}}
{{- define "` + chartName + `.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{- /* Refuses values the hub would refuse, or the Deployment could not take: ` + f.leaderArg + ` in extraArgs
with sharded (which runs ` + f.shardedArg + `), ` + f.shardedArg + ` in extraArgs without, podLabels setting a label of the
Deployment's selector. */}}
{{- define "` + chartName + `.checkValues" -}}
{{- range .Values.extraArgs }}
{{- $flag := regexReplaceAll "=.*" (toString .) "" }}
{{- if and $.Values.sharded (eq $flag "` + f.leaderArg + `") }}
{{- fail "sharded: true runs the hub with ` + f.shardedArg + `, which it refuses together with ` + f.leaderArg + ` (sharded replicas share the members, leader election makes one replica do everything): remove ` + f.leaderArg + ` from extraArgs" }}
{{- end }}
{{- if and (not $.Values.sharded) (eq $flag "` + f.shardedArg + `") }}
{{- fail "extraArgs has ` + f.shardedArg + `, which the hub refuses together with the ` + f.leaderArg + ` of sharded: false: set sharded: true instead" }}
{{- end }}
{{- end }}
{{- range $key := list ` + quoteAll(f.selector) + ` }}
{{- if hasKey ($.Values.podLabels | default dict) $key }}
{{- fail (printf "podLabels may not set %s: it is a label of the Deployment's selector" $key) }}
{{- end }}
{{- end }}
{{- end }}

{{- /* Whether to create the PodDisruptionBudget: podDisruptionBudget.enabled, or sharded when it is null. */}}
{{- define "` + chartName + `.podDisruptionBudget" -}}
{{- $enabled := .Values.podDisruptionBudget.enabled -}}
{{- if kindIs "invalid" $enabled }}{{ $enabled = .Values.sharded }}{{ end -}}
{{- if $enabled }}true{{ end -}}
{{- end }}
`
}

// quoteAll is strs as quoted template strings separated by spaces.
func quoteAll(strs []string) string {
	quoted := make([]string, len(strs))
	for i, s := range strs {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(quoted, " ")
}

func notes(f *facts) string {
	var b strings.Builder
	b.WriteString("{{- /* " + generatedBy + " */ -}}\n")
	fmt.Fprintf(&b, `ConfigBundle Hub ({{ include "%s.image" . }}) is installed in the namespace {{ .Release.Namespace }}:
{{- if .Values.sharded }}
{{ .Values.replicaCount }} replicas run %s and share the members between them.
{{- else }}
{{ .Values.replicaCount }} replica(s) run %s: one reconciles, the others stand by.
{{- end }}
`, chartName, f.shardedArg, f.leaderArg)
	if len(f.namespaceLabels) > 0 {
		var labels []string
		for _, k := range slices.Sorted(maps.Keys(f.namespaceLabels)) {
			labels = append(labels, k+"="+f.namespaceLabels[k])
		}
		fmt.Fprintf(&b, `
The namespace holds the members' credentials: give it config/default's labels (the hub's pod meets
the restricted Pod Security Standard, so nothing more privileged need run beside them):

  kubectl label namespace {{ .Release.Namespace }} %s
`, strings.Join(labels, " "))
	}
	fmt.Fprintf(&b, `
Watch the rollout:

  kubectl -n {{ .Release.Namespace }} rollout status deployment/%s

Then register the members (their kubeconfig Secrets go to this namespace):

  hub register NAME --member-kubeconfig MEMBER.kubeconfig --hub-kubeconfig HUB.kubeconfig --secret-namespace {{ .Release.Namespace }}
`, chartName)
	return b.String()
}

const helmignore = "# " + generatedBy + "\n" + `# Patterns ignored when packaging the chart.
.DS_Store
.git/
.gitignore
*.swp
*.bak
*.tmp
*.orig
*~
.idea/
.vscode/
`

func readme(f *facts, vals []value) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- %s -->\n\n# Helm chart %s\n\n", generatedBy, chartName)
	b.WriteString("ConfigBundle Hub on its hub cluster. This chart is generated by `make helm` (hack/helmgen) from the kustomize " +
		"manifests config/default, config/sharded and config/prometheus: edit those, not this directory. With default values it " +
		"renders config/default's objects, but for Helm's standard labels (helm.sh/chart, app.kubernetes.io/managed-by, " +
		"app.kubernetes.io/instance, app.kubernetes.io/version); test/manifests/helm_test.go proves it.\n\n")
	fmt.Fprintf(&b, "```sh\nhelm install %s config/chart/%s -n %s --create-namespace --set image.tag=TAG\n", chartName, chartName, f.namespace)
	fmt.Fprintf(&b, "# sharded, as config/sharded:\nhelm install %s config/chart/%s -n %s --create-namespace --set sharded=true,replicaCount=%v\n```\n\n",
		chartName, chartName, f.namespace, f.shardedReplicas)
	fmt.Fprintf(&b, "Objects keep config/default's names (%s, %s, ...), cluster-scoped ones included: install the chart once per cluster. ", chartName, f.metricsService)
	fmt.Fprintf(&b, "The CRDs (%s) are in crds/: Helm installs them before anything else and never deletes them "+
		"(which would delete every object of theirs), but `helm upgrade` does not upgrade them either: apply them first, "+
		"`kubectl apply --server-side -f config/chart/%s/crds/`.\n\n", strings.Join(f.crds, ", "), chartName)
	if len(f.monitors) > 0 {
		b.WriteString(monitoringReadme(f))
	}
	b.WriteString("## Values\n\nHelm merges maps given with --set or -f into the defaults below: to drop a default key, set it to null " +
		"(for example `--set affinity=null`). values.schema.json refuses unknown keys.\n\n")
	b.WriteString("| Key | Default | Description |\n| --- | --- | --- |\n")
	writeTable(&b, vals, "")
	return b.String()
}

func monitoringReadme(f *facts) string {
	var b strings.Builder
	b.WriteString("## Monitoring\n\nWith the Prometheus Operator's CRDs installed, `--set serviceMonitor.enabled=true,prometheusRule.enabled=true` " +
		"adds config/prometheus's ServiceMonitor and PrometheusRule; `serviceMonitor.labels` and `prometheusRule.labels` add the labels " +
		"your Prometheus selects them by (kube-prometheus-stack: `release=<its release name>`).")
	if f.metricsReader != "" {
		fmt.Fprintf(&b, " The hub authorizes every scrape: bind the ClusterRole %s to your Prometheus's ServiceAccount, "+
			"`kubectl create clusterrolebinding prometheus-%s --clusterrole=%s --serviceaccount=NAMESPACE:NAME`.",
			f.metricsReader, f.metricsReader, f.metricsReader)
	}
	return b.String() + "\n\n"
}

func writeTable(b *strings.Builder, vals []value, prefix string) {
	for _, v := range vals {
		if v.children != nil {
			writeTable(b, v.children, prefix+v.key+".")
			continue
		}
		def, err := json.Marshal(v.def)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(b, "| `%s` | `%s` | %s |\n", prefix+v.key, strings.ReplaceAll(string(def), "|", `\|`), strings.ReplaceAll(v.doc, "|", `\|`))
	}
}
