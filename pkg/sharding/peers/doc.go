/*
Copyright 2025 The Kubernetes Authors.

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

// Package peers is the peer registry of sharded replicas: each peer announces itself with a
// coordination.k8s.io Lease named <prefix>-<peerID>, renewed once a renew period, and lists the
// others' at a refresh interval. Snapshot gives the live peers for rendezvous hashing; a peer is
// judged alive while its Lease keeps changing, on the observer's own monotonic clock (no clock
// sync needed), and Dead says when it certainly is not. Validity says until when this peer may
// act on the fences it took in the current epoch: the fences of the clusters rest on it, so that
// nothing is renewed per cluster. It began as multicluster-runtime v0.24.1's
// pkg/manager/coordinator/sharded/peers.
package peers
