/*
Copyright 2024 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package namespace

import (
	"context"

	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// NamespacedCluster is a cluster that operates on a specific namespace.
type NamespacedCluster struct {
	clusterName multicluster.ClusterName
	cluster.Cluster
}

// Name returns the name of the cluster.
func (c *NamespacedCluster) Name() string {
	return c.clusterName.String()
}

// GetCache returns a cache.Cache.
func (c *NamespacedCluster) GetCache() cache.Cache {
	return &NamespacedCache{clusterName: c.clusterName, Cache: c.Cluster.GetCache()}
}

// GetClient returns a client scoped to the namespace.
func (c *NamespacedCluster) GetClient() client.Client {
	return &NamespacedClient{clusterName: c.clusterName, Client: c.Cluster.GetClient()}
}

// GetEventRecorderFor returns a new EventRecorder for the provided name.
//
// Deprecated: this uses the old events API and will be removed in a future release. Please use GetEventRecorder instead.
func (c *NamespacedCluster) GetEventRecorderFor(name string) record.EventRecorder {
	panic("implement me")
}

// GetEventRecorder returns an EventRecorder for the provided name.
func (c *NamespacedCluster) GetEventRecorder(name string) events.EventRecorder {
	panic("implement me")
}

// GetAPIReader returns a reader against the cluster.
func (c *NamespacedCluster) GetAPIReader() client.Reader {
	return c.GetClient()
}

// Start starts the cluster.
func (c *NamespacedCluster) Start(ctx context.Context) error {
	return nil // no-op as this is shared
}
