package template

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	configbundlev1alpha1 "configbundle.dev/hub/api/configbundle/v1alpha1"
	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

func fromConfigMap(name string, keys []string, prefix string) hubv1alpha1.DataFromSource {
	return hubv1alpha1.DataFromSource{ConfigMapRef: &hubv1alpha1.SourceReference{Name: name}, Keys: keys, Prefix: prefix}
}

// TestResolveSources: sources merge in order under the template's data; a key defined twice is
// InvalidTemplate naming it, unless the later entry sets a prefix; a missing or unlabelled
// source is SourceNotFound naming the label; a missing listed key, binaryData, an invalid key or
// too much data is SourceInvalid.
func TestResolveSources(t *testing.T) {
	t.Parallel()
	sources := map[string]*Source{
		"ca":    {Data: map[string]string{"ca.crt": "PEM-A", "extra": "x"}},
		"ca2":   {Data: map[string]string{"ca.crt": "PEM-B"}},
		"flags": {Data: map[string]string{"feature": "{{ .Cluster.Name }}"}},
		"bin":   {Data: map[string]string{"a": "1"}, BinaryKeys: []string{"blob"}},
		"big":   {Data: manyValues(40, "v")},
		"long":  {Data: map[string]string{"v": strings.Repeat("x", configbundlev1alpha1.MaxDataValueBytes+1)}},
		"msg":   {Data: map[string]string{"message": "m"}},
	}
	read := func(e hubv1alpha1.DataFromSource) *Source {
		if e.SecretRef != nil {
			return sources[e.SecretRef.Name]
		}
		return sources[e.ConfigMapRef.Name]
	}
	fromSecret := func(name string) hubv1alpha1.DataFromSource {
		return hubv1alpha1.DataFromSource{SecretRef: &hubv1alpha1.SourceReference{Name: name}}
	}
	tests := []struct {
		name     string
		dataFrom []hubv1alpha1.DataFromSource
		data     map[string]string
		// secret: the template's target is Secret.
		secret   bool
		want     map[string]string
		reason   string
		mentions string
	}{
		{name: "a Secret for a Secret", dataFrom: []hubv1alpha1.DataFromSource{fromSecret("msg")}, secret: true, want: map[string]string{"message": "m"}},
		{name: "a Secret for a ConfigMap", dataFrom: []hubv1alpha1.DataFromSource{fromSecret("ca")}, reason: hubv1alpha1.SourceInvalidReason, mentions: "never lands in a ConfigMap"},
		{name: "a ConfigMap for a Secret", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", nil, "")}, secret: true,
			reason: hubv1alpha1.SourceInvalidReason, mentions: "only from secretRef sources"},
		{name: "a missing Secret", dataFrom: []hubv1alpha1.DataFromSource{fromSecret("gone")}, secret: true,
			reason: hubv1alpha1.SourceNotFoundReason, mentions: "kubectl label secret -n tenant gone " + hubv1alpha1.SourceLabel + "=true"},
		{name: "none", want: nil},
		{name: "one source", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", nil, "")}, want: map[string]string{"ca.crt": "PEM-A", "extra": "x"}},
		{name: "listed keys only", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", []string{"ca.crt"}, "")}, want: map[string]string{"ca.crt": "PEM-A"}},
		{name: "prefix", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", []string{"ca.crt"}, "eu-")}, want: map[string]string{"eu-ca.crt": "PEM-A"}},
		{name: "in order, beside the template's", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", []string{"ca.crt"}, ""), fromConfigMap("flags", nil, "")},
			data: map[string]string{"own": "1"}, want: map[string]string{"ca.crt": "PEM-A", "feature": "{{ .Cluster.Name }}"}},
		{name: "two sources define a key", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", nil, ""), fromConfigMap("ca2", nil, "")},
			reason: hubv1alpha1.InvalidTemplateReason, mentions: `"ca.crt"`},
		{name: "the later sets a prefix and wins", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", nil, "b-"), fromConfigMap("ca2", nil, "b-")},
			want: map[string]string{"b-ca.crt": "PEM-B", "b-extra": "x"}},
		{name: "a source and the template define a key", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", nil, "")}, data: map[string]string{"extra": "y"},
			reason: hubv1alpha1.InvalidTemplateReason, mentions: `"extra"`},
		{name: "missing or unlabelled", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", nil, ""), fromConfigMap("gone", nil, "")},
			reason: hubv1alpha1.SourceNotFoundReason, mentions: hubv1alpha1.SourceLabel + "=true"},
		{name: "a listed key missing", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("ca", []string{"tls.crt"}, "")},
			reason: hubv1alpha1.SourceInvalidReason, mentions: `"tls.crt"`},
		{name: "binaryData", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("bin", nil, "")}, reason: hubv1alpha1.SourceInvalidReason, mentions: "binaryData"},
		{name: "binaryData not taken", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("bin", []string{"a"}, "")}, want: map[string]string{"a": "1"}},
		{name: "the key message", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("msg", nil, "")}, reason: hubv1alpha1.SourceInvalidReason, mentions: "spec.message"},
		{name: "too many keys", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("big", nil, "")}, data: manyValues2(9),
			reason: hubv1alpha1.SourceInvalidReason, mentions: "49 keys"},
		{name: "a value too long", dataFrom: []hubv1alpha1.DataFromSource{fromConfigMap("long", nil, "")}, reason: hubv1alpha1.SourceInvalidReason, mentions: `"v"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fb := &hubv1alpha1.FleetBundle{}
			fb.Namespace, fb.Spec.DataFrom, fb.Spec.Template.Spec.Data = "tenant", tt.dataFrom, dataValues(tt.data)
			if tt.secret {
				fb.Spec.Template.Spec.Target = configbundlev1alpha1.TargetSecret
			}
			got, err := ResolveSources(fb, read)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("ResolveSources: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ResolveSources (-want +got):\n%s", diff)
				}
				return
			}
			var se *SourceError
			if !errors.As(err, &se) || se.Reason != tt.reason || !strings.Contains(se.Message, tt.mentions) {
				t.Errorf("ResolveSources: got %v, want a %s error mentioning %s", err, tt.reason, tt.mentions)
			}
		})
	}
}

// manyValues2 is n keys distinct from manyValues', t00, t01, ...
func manyValues2(n int) map[string]string {
	m := manyValues(n, "w")
	out := make(map[string]string, n)
	for k, v := range m {
		out["t"+k] = v
	}
	return out
}

// TestSourcesAreNeverTemplated: with GoTemplate, a source's value that holds "{{" is placed as
// written, while the template's own values are rendered; a source's value counts toward no
// template bound; and the sources change the definition's hash only when they are set.
func TestSourcesAreNeverTemplated(t *testing.T) {
	t.Parallel()
	d := goTemplate("cluster={{ .Cluster.Name }}", map[string]string{"own": "{{ .Cluster.Name }}"}, nil, nil)
	plain := Hash(d)
	d.Sources = map[string]string{"feature": "{{ .Cluster.Name }} {{ range }} {{ define \"x\" }}", "code": strings.Repeat("{{", MaxTemplateActions+1)}
	if err := d.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	got, err := d.Render(euMember)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	want := map[string]configbundlev1alpha1.DataValue{"own": "member-a", "feature": configbundlev1alpha1.DataValue(d.Sources["feature"]),
		"code": configbundlev1alpha1.DataValue(d.Sources["code"])}
	if diff := cmp.Diff(want, got.Spec.Data); diff != "" {
		t.Errorf("rendered data (-want +got):\n%s", diff)
	}
	if Hash(d) == plain {
		t.Error("the sources do not change the hash")
	}
	d.Sources = nil
	if Hash(d) != plain {
		t.Error("a definition without sources hashes differently")
	}
}

// TestSecretHash: the hash of a Secret target's sources is the SHA-256 of their content in
// lowercase hex, the same for the same content whatever the order, and another for another;
// a pin compares it with target Secret, SourcesHash otherwise.
func TestSecretHash(t *testing.T) {
	t.Parallel()
	a, b := map[string]string{"x": "1", "y": "2"}, map[string]string{"y": "2", "x": "1"}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"64 hex digits", fmt.Sprint(len(SecretHash(a))), "64"},
		{"the same content", SecretHash(a), SecretHash(b)},
		{"the SHA-256 of its JSON", SecretHash(map[string]string{}), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
		{"a pin with target Secret", PinHash(true, a), SecretHash(a)},
		{"a pin with target ConfigMap", PinHash(false, a), SourcesHash(a)},
		{"the snapshot's name", SnapshotName("pull", 3), "pull-3-sources"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, tt.got, tt.want)
		}
	}
	if SecretHash(a) == SecretHash(map[string]string{"x": "1", "y": "3"}) {
		t.Error("another content, the same hash")
	}
}
