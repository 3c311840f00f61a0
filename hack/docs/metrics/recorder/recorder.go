package recorder

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// registry is controller-runtime's registry, recording what is registered with it.
type registry struct {
	ctrlmetrics.RegistererGatherer

	mu         sync.Mutex
	collectors []prometheus.Collector
}

var recorded = &registry{RegistererGatherer: ctrlmetrics.Registry}

func init() {
	ctrlmetrics.Registry = recorded
}

// Register registers c with controller-runtime's registry and, if that succeeds, records it.
func (r *registry) Register(c prometheus.Collector) error {
	if err := r.RegistererGatherer.Register(c); err != nil {
		return err //nolint:wrapcheck // the registry's own error, which callers inspect with errors.As
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.collectors = append(r.collectors, c)
	return nil
}

// MustRegister registers and records each collector, panicking as the registry does on an error.
func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Collectors returns the collectors registered so far, in their order of registration.
func Collectors() []prometheus.Collector {
	recorded.mu.Lock()
	defer recorded.mu.Unlock()
	return append([]prometheus.Collector(nil), recorded.collectors...)
}
