package main

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// facts are what the values, the README and NOTES.txt say, read from the sources.
type facts struct {
	namespace          string            // config/default's namespace
	namespaceLabels    map[string]string // its Pod Security labels
	repository         string
	appVersion         string // the image's tag in config/default
	digest             string
	pullPolicy         string
	replicas           any // config/default's
	shardedReplicas    any // config/sharded's
	leaderArg          string
	shardedArg         string
	argIndex           int // of leaderArg in the container's args
	resources          any
	pod                map[string]any // config/default's values of podKeys and podScalarKeys
	selector           []string       // the Deployment's selector's label keys, which podLabels may not set
	serviceAccount     string         // the Deployment's serviceAccountName
	serviceAccountSeen bool           // config/default has it
	logFlag            string         // the hub's flag of its log level
	metricsService     string
	metricsPort        any
	metricsPortName    string
	pdb                string
	maxUnavailable     any
	monitors           []string // kinds of config/prometheus the chart holds
	metricsReader      string   // a ClusterRole granting get on /metrics, if any
	crds               []string
}

// podKeys are the pod spec fields (maps and lists) the values may set, with config/default's as
// default; podScalarKeys the scalar ones.
var (
	podKeys       = []string{"affinity", "imagePullSecrets", "nodeSelector", "tolerations", "topologySpreadConstraints"}
	podScalarKeys = []string{"priorityClassName"}
)

// logLevelFlag is zap's flag of the hub's log level (hub/main.go binds zap's flags).
const logLevelFlag = "--zap-log-level"

// monitorValues maps the kinds config/prometheus may hold to the value that enables them.
var monitorValues = map[string]string{"ServiceMonitor": "serviceMonitor", "PrometheusRule": "prometheusRule"}

// readNamespace reads config/default's namespace and its Pod Security labels.
func (g *generator) readNamespace() error {
	ns, err := only(g.src.base, "Namespace", "config/default")
	if err != nil {
		return err
	}
	g.f.namespace = name(ns)
	g.f.namespaceLabels = map[string]string{}
	for k, v := range child(ns, "metadata", "labels") {
		if s, ok := v.(string); ok && strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			g.f.namespaceLabels[k] = s
		}
	}
	return nil
}

// readSharded finds what config/sharded changes in the Deployment: the replica count and one
// argument, and nothing else.
func (g *generator) readSharded() error {
	b, bc, err := deploymentOf(g.src.base, "config/default")
	if err != nil {
		return err
	}
	s, sc, err := deploymentOf(g.src.sharded, "config/sharded")
	if err != nil {
		return err
	}
	g.f.shardedReplicas = get(s, "spec", "replicas")
	child(s, "spec")["replicas"] = get(b, "spec", "replicas")
	bArgs, _ := bc["args"].([]any)
	sArgs, _ := sc["args"].([]any)
	g.f.argIndex = -1
	for i := range min(len(bArgs), len(sArgs)) {
		if bArgs[i] != sArgs[i] && g.f.argIndex == -1 {
			g.f.argIndex = i
			g.f.leaderArg, _ = bArgs[i].(string)
			g.f.shardedArg, _ = sArgs[i].(string)
			sArgs[i] = bArgs[i]
		}
	}
	if g.f.argIndex == -1 || !reflect.DeepEqual(b, s) {
		return errors.New("config/sharded must change config/default's Deployment in its replica count and " +
			"in one argument it replaces (--leader-elect by --sharded), and in nothing else: teach hack/helmgen the new change")
	}
	return nil
}

// baseObjects turns config/default's objects into CRDs and templates.
func (g *generator) baseObjects() error {
	for _, o := range g.src.base {
		var err error
		switch {
		case kind(o) == "Namespace":
			continue // the release's namespace; NOTES.txt prints its labels
		case kind(o) == "CustomResourceDefinition":
			g.f.crds = append(g.f.crds, name(o))
			err = g.crd(o)
		case kind(o) == "Deployment":
			err = g.deployment(o)
		case kind(o) == "Service" && name(o) == chartName+"-metrics":
			err = g.metricsService(o)
		case kind(o) == "ServiceAccount" && name(o) == g.f.serviceAccount:
			err = g.serviceAccount(o)
		default:
			if kind(o) == "ClusterRole" && grantsMetrics(o) {
				g.f.metricsReader = name(o)
			}
			err = g.templateFile(deepCopy(o), "", "")
		}
		if err != nil {
			return fmt.Errorf("%s: %w", id(o), err)
		}
	}
	if g.f.metricsService == "" {
		return fmt.Errorf("config/default has no Service %s-metrics", chartName)
	}
	if !g.f.serviceAccountSeen {
		return fmt.Errorf("config/default has no ServiceAccount %s, the Deployment's", g.f.serviceAccount)
	}
	return nil
}

// deployment templates the hub's Deployment: replicas, the pod template and its one container.
func (g *generator) deployment(base object) error {
	d := deepCopy(base)
	spec := child(d, "spec")
	g.f.replicas = spec["replicas"]
	spec["replicas"] = g.tk.expr("{{ .Values.replicaCount }}")
	g.f.selector = slices.Sorted(maps.Keys(child(spec, "selector", "matchLabels")))
	if err := g.podTemplate(child(spec, "template")); err != nil {
		return err
	}
	c, err := onlyContainer(d)
	if err != nil {
		return err
	}
	if err := g.container(c); err != nil {
		return err
	}
	return g.templateFile(d, "", fmt.Sprintf("{{- include \"%s.checkValues\" . }}\n", chartName))
}

// podTemplate templates the pods' annotations, labels and scheduling fields.
func (g *generator) podTemplate(tmpl object) error {
	podMeta := child(tmpl, "metadata")
	if err := g.annotations(podMeta, "pod template", ".Values.podAnnotations"); err != nil {
		return err
	}
	child(podMeta, "labels")[g.tk.lines(listItems(".Values.podLabels"))] = ""
	pod := child(tmpl, "spec")
	g.f.serviceAccount = str(pod, "serviceAccountName")
	for _, k := range podKeys {
		g.f.pod[k] = pod[k]
		pod[k] = g.tk.lines(optional(k, ".Values."+k))
	}
	for _, k := range podScalarKeys {
		g.f.pod[k] = pod[k]
		pod[k] = g.tk.lines(optionalScalar(k, ".Values."+k))
	}
	return nil
}

// container templates the hub's container: its image, resources and arguments.
func (g *generator) container(c object) error {
	args, _ := c["args"].([]any)
	g.f.repository, g.f.appVersion, g.f.digest = splitImage(str(c, "image"))
	c["image"] = g.tk.expr(fmt.Sprintf(`{{ include "%s.image" . | quote }}`, chartName))
	g.f.pullPolicy = str(c, "imagePullPolicy")
	c["imagePullPolicy"] = g.tk.lines(optionalScalar("imagePullPolicy", ".Values.image.pullPolicy"))
	g.f.resources = c["resources"]
	c["resources"] = g.tk.lines(optional("resources", ".Values.resources"))
	args[g.f.argIndex] = g.tk.lines(func(ind string) string {
		return fmt.Sprintf("{{- if .Values.sharded }}\n%s- %s\n{{- else }}\n%s- %s\n{{- end }}",
			ind, yamlScalar(g.f.shardedArg), ind, yamlScalar(g.f.leaderArg))
	})
	for _, a := range args {
		if s, _ := a.(string); s == logLevelFlag || strings.HasPrefix(s, logLevelFlag+"=") {
			return fmt.Errorf("config/default sets %s: teach hack/helmgen to take logLevel's default from it", logLevelFlag)
		}
	}
	g.f.logFlag = logLevelFlag
	logLevel := g.tk.lines(func(ind string) string {
		return fmt.Sprintf("{{- with .Values.logLevel }}\n%s- {{ printf \"%s=%%v\" . | quote }}\n{{- end }}", ind, logLevelFlag)
	})
	c["args"] = append(args, logLevel, g.tk.lines(listItems(".Values.extraArgs")))
	return nil
}

// serviceAccount templates the hub's ServiceAccount, with serviceAccount.annotations.
func (g *generator) serviceAccount(base object) error {
	sa := deepCopy(base)
	if err := g.annotations(child(sa, "metadata"), "ServiceAccount "+name(sa), ".Values.serviceAccount.annotations"); err != nil {
		return err
	}
	g.f.serviceAccountSeen = true
	return g.templateFile(sa, "", "")
}

func (g *generator) metricsService(base object) error {
	s := deepCopy(base)
	ports, _ := get(s, "spec", "ports").([]any)
	if len(ports) != 1 {
		return fmt.Errorf("the metrics Service has %d ports, want one", len(ports))
	}
	p := ports[0].(map[string]any)
	g.f.metricsService, g.f.metricsPort, g.f.metricsPortName = name(s), p["port"], str(p, "name")
	p["port"] = g.tk.expr("{{ .Values.metrics.service.port }}")
	return g.templateFile(s, ".Values.metrics.service.enabled", "")
}

// crd writes a CRD, as rendered, to crds/.
func (g *generator) crd(o object) error {
	raw, err := yaml.Marshal(o)
	if err != nil {
		return err
	}
	g.files["crds/"+name(o)+".yaml"] = "# " + generatedBy + "\n" + string(raw)
	return nil
}

// shardedObjects templates what config/sharded adds: its PodDisruptionBudget, and nothing else.
func (g *generator) shardedObjects() error {
	base := byID(g.src.base)
	for _, o := range g.src.sharded {
		if b, ok := base[id(o)]; ok {
			if kind(o) != "Deployment" && !reflect.DeepEqual(b, o) {
				return fmt.Errorf("config/sharded changes %s: teach hack/helmgen the change", id(o))
			}
			continue
		}
		if kind(o) != "PodDisruptionBudget" || g.f.pdb != "" {
			return fmt.Errorf("config/sharded adds %s: teach hack/helmgen which value enables it", id(o))
		}
		p := deepCopy(o)
		spec := child(p, "spec")
		if _, ok := spec["maxUnavailable"]; !ok {
			return fmt.Errorf("%s sets no maxUnavailable", id(o))
		}
		g.f.pdb, g.f.maxUnavailable = name(o), spec["maxUnavailable"]
		spec["maxUnavailable"] = g.tk.expr("{{ .Values.podDisruptionBudget.maxUnavailable }}")
		if err := g.templateFile(p, fmt.Sprintf(`include "%s.podDisruptionBudget" .`, chartName), ""); err != nil {
			return err
		}
	}
	return nil
}

// monitoringObjects templates config/prometheus's ServiceMonitor and PrometheusRule, off by
// default.
func (g *generator) monitoringObjects() error {
	base := byID(g.src.base)
	for _, o := range g.src.prometheus {
		if b, ok := base[id(o)]; ok && reflect.DeepEqual(b, o) {
			continue // config/default's own, included by config/prometheus
		}
		v, ok := monitorValues[kind(o)]
		if !ok || slices.Contains(g.f.monitors, kind(o)) {
			return fmt.Errorf("config/prometheus holds %s: teach hack/helmgen which value enables it", id(o))
		}
		g.f.monitors = append(g.f.monitors, kind(o))
		var prelude string
		if kind(o) == "ServiceMonitor" {
			prelude = "{{- if not .Values.metrics.service.enabled }}{{ fail \"serviceMonitor.enabled needs metrics.service.enabled: " +
				"the ServiceMonitor scrapes the endpoints of the metrics Service\" }}{{ end }}\n"
		}
		if err := g.templateFile(deepCopy(o), ".Values."+v+".enabled", prelude); err != nil {
			return err
		}
	}
	return nil
}

// templateFile writes obj, with the standard labels, the release's namespace and any placeholder
// already in it, to templates/, rendered only when cond (if any) holds; prelude (template text
// that renders nothing, a check) precedes it, within the condition.
func (g *generator) templateFile(obj object, cond, prelude string) error {
	labels := child(obj, "metadata", "labels")
	labels[g.tk.lines(func(ind string) string {
		return fmt.Sprintf(`{{- include "%s.labels" . | nindent %d }}`, chartName, len(ind))
	})] = ""
	if v, ok := monitorValues[kind(obj)]; ok {
		labels[g.tk.lines(listItems(".Values."+v+".labels"))] = ""
	}
	replaceNamespace(obj, g.f.namespace, g.tk.expr(releaseNamespace))
	text, err := g.tk.template(obj)
	if err != nil {
		return err
	}
	file := "templates/" + fileName(obj)
	if _, dup := g.files[file]; dup {
		return fmt.Errorf("two objects would be written to %s", file)
	}
	head := "{{- /* " + generatedBy + " */ -}}\n"
	text = prelude + text
	if cond != "" {
		text = "{{- if " + cond + " }}\n" + text + "{{- end }}\n"
	}
	g.files[file] = head + text
	return nil
}

// fileName is kind[-name without the chart's prefix].yaml.
func fileName(o object) string {
	k, n := strings.ToLower(kind(o)), name(o)
	switch {
	case n == chartName:
		return k + ".yaml"
	case strings.HasPrefix(n, chartName+"-"):
		return k + "-" + strings.TrimPrefix(n, chartName+"-") + ".yaml"
	default:
		return k + "-" + n + ".yaml"
	}
}

// annotations templates the annotations of meta as the map at the values path v; what names
// meta's object in the error when config/default already sets annotations there.
func (g *generator) annotations(meta object, what, v string) error {
	if _, ok := meta["annotations"]; ok {
		return fmt.Errorf("config/default's %s has annotations: teach hack/helmgen to merge %s into them", what, strings.TrimPrefix(v, ".Values."))
	}
	meta["annotations"] = g.tk.lines(optional("annotations", v))
	return nil
}

// deploymentOf returns a copy of the only Deployment of objs, rendered from where, and its
// container.
func deploymentOf(objs []object, where string) (d, c object, err error) {
	if d, err = only(objs, "Deployment", where); err != nil {
		return nil, nil, err
	}
	d = deepCopy(d)
	c, err = onlyContainer(d)
	return d, c, err
}

// onlyContainer returns the only container of Deployment d.
func onlyContainer(d object) (object, error) {
	containers, _ := get(d, "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		return nil, fmt.Errorf("%s has %d containers, want one", id(d), len(containers))
	}
	return containers[0].(map[string]any), nil
}

// splitImage splits an image reference into repository, tag and digest.
func splitImage(ref string) (repo, tag, digest string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, tag = ref[:i], ref[i+1:]
	}
	return ref, tag, digest
}

// grantsMetrics tells whether ClusterRole o grants get on the non-resource URL /metrics.
func grantsMetrics(o object) bool {
	rules, _ := o["rules"].([]any)
	for _, r := range rules {
		urls, _ := get(r.(map[string]any), "nonResourceURLs").([]any)
		if slices.Contains(urls, any("/metrics")) {
			return true
		}
	}
	return false
}
