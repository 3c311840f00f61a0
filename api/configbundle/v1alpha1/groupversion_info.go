package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the ConfigBundle API.
	GroupVersion = schema.GroupVersion{Group: "configbundle.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the API's types with a scheme.
	SchemeBuilder runtime.SchemeBuilder

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// register adds the API's types objs to SchemeBuilder.
func register(objs ...runtime.Object) {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objs...)
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
}
