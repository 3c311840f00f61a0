package spokeprovider

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretCacheOptions restricts a hub manager's cache of Secrets to the labelled Secrets of the
// provider's namespace: the hub reads no other Secret.
func (p *Provider) SecretCacheOptions(opts *cache.Options) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[&corev1.Secret{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{p.opts.Namespace: {}},
		Label:      labels.SelectorFromSet(labels.Set{p.opts.Label: "true"}),
	}
}
