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

package sharder

import (
	"hash/fnv"
	"math"
)

// HRW implements Highest-Random-Weight (aka Rendezvous) hashing.
//
// Given a stable cluster identifier and a snapshot of peers, HRW selects
// the peer with the highest score for that cluster. All peers compute the
// same scores independently, so the winner is deterministic as long as
// the inputs (clusterID, peer IDs, weights) are identical.
//
// Scores: the 64-bit FNV-1a hash of clusterID+"|"+peerID, passed through
// a 64-bit finalizer (MurmurHash3's fmix64) so that IDs differing only in
// their last characters (r0, r1, r2; pod name suffixes) still get
// independent, uniform scores — FNV-1a alone gives one of three such peers
// half of all clusters. Weighting uses the canonical weighted rendezvous
// score -w/ln(u), u uniform in (0,1), so that a peer's expected share is
// its Weight over the sum of the weights.
type HRW struct{}

// NewHRW returns a new HRW sharder.
func NewHRW() *HRW { return &HRW{} }

// ShouldOwn returns true if self is the HRW winner for clusterID among peers.
//
// Inputs:
//   - clusterID: a stable string that identifies the shard/cluster (e.g., namespace name).
//   - peers:     the full membership snapshot used for the decision; all participants
//     should use the same list (order does not matter).
//   - self:      the caller's peer info.
//
// Behavior & caveats:
//   - If peers is empty, this returns true (caller may choose to gate with fencing).
//   - Weight 0 is treated as 1 (no special meaning).
//   - Ties (practically unreachable) are broken by the larger peer ID.
//   - The hash is fast and stable but not cryptographically secure.
//   - This method does not enforce ownership; callers should still use a
//     per-shard fence (e.g., a Lease) to serialize actual work.
//
// Determinism requirements:
//   - All peers must see the same peer IDs and weights when computing.
//   - clusterID must be stable across processes (same input → same winner).
func (h *HRW) ShouldOwn(clusterID string, peers []PeerInfo, self PeerInfo) bool {
	if len(peers) == 0 {
		return true
	}
	var best PeerInfo
	bestScore := math.Inf(-1)
	for _, p := range peers {
		score := Score(clusterID, p)
		if score > bestScore || (score == bestScore && p.ID > best.ID) {
			bestScore = score
			best = p
		}
	}
	return best.ID == self.ID
}

// Score is peer p's weighted rendezvous score for clusterID: the highest score wins.
func Score(clusterID string, p PeerInfo) float64 {
	w := p.Weight
	if w == 0 {
		w = 1
	}
	// u in (0,1): the top 53 bits of the mixed hash, centred in their interval.
	u := (float64(fmix64(hash64(clusterID+"|"+p.ID))>>11) + 0.5) / (1 << 53)
	return -float64(w) / math.Log(u)
}

// hash64 returns a stable 64-bit FNV-1a hash of s.
func hash64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// fmix64 is MurmurHash3's 64-bit finalizer: every input bit affects every output bit.
func fmix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
