package spokeprovider

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"configbundle.dev/hub/config"
)

// TestCRDDrift: the member's CRD differs from the hub's only in the fields the hub applies, with
// the API server's defaults taken as said; the rest is not the hub's to keep.
func TestCRDDrift(t *testing.T) {
	t.Parallel()
	crds, err := config.MemberCRDs()
	if err != nil {
		t.Fatal(err)
	}
	want := crds[0]
	tests := []struct {
		name   string
		change func(*apiextensionsv1.CustomResourceDefinition)
		drift  string
	}{
		{name: "as the API server returns it, defaults set", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
		}},
		{name: "labels, annotations and a short name someone added", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Labels, c.Annotations = map[string]string{"team": "x"}, map[string]string{"note": "y"}
			c.Spec.Names.ShortNames = []string{"cb"}
		}},
		{name: "schema stripped", drift: "spec.versions[v1alpha1].schema", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: ptr.To(true)}}
		}},
		{name: "a bound loosened", drift: "spec.versions[v1alpha1].schema", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			spec := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			msg := spec.Properties["message"]
			msg.MaxLength = nil
			spec.Properties["message"] = msg
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}},
		{name: "status subresource removed", drift: "spec.versions[v1alpha1]", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Subresources = nil
		}},
		{name: "a version added", drift: "spec.versions", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v9", Served: true})
		}},
		{name: "names and scope", drift: "spec.names, spec.scope", change: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Names.Singular = "bundle"
			c.Spec.Scope = apiextensionsv1.ClusterScoped
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			live := want.DeepCopy()
			crdDefaulter.Default(live)
			tt.change(live)
			if got := crdDrift(want, live); got != tt.drift {
				t.Errorf("crdDrift = %q, want %q", got, tt.drift)
			}
			if want.Spec.Conversion != nil {
				t.Errorf("crdDrift defaulted the hub's CRD itself")
			}
		})
	}
}
