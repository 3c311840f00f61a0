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

// Package multi provides a multicluster.Provider that allows to utilize
// multiple providers in a single multicluster.Manager without
// conflicting cluster names.
//
// Each provider must be added with a unique name, which is used as
// a prefix for clusters coming from that provider.
//
// When implementing providers that use the multi provider expose the
// Options when constructing the multi provider to allow users to
// configure the separator and logger suffix.
package multi
