package sharding

import (
	"fmt"
	"testing"

	"configbundle.dev/hub/pkg/sharding/sharder"
)

// owner returns the peer rendezvous hashing names for a member.
func owner(h sharder.Sharder, member string, peers []sharder.PeerInfo) string {
	for _, p := range peers {
		if h.ShouldOwn(member, peers, p) {
			return p.ID
		}
	}
	return ""
}

func peerInfos(weights map[string]uint32) []sharder.PeerInfo {
	var out []sharder.PeerInfo
	for id, w := range weights {
		out = append(out, sharder.PeerInfo{ID: id, Weight: w})
	}
	return out
}

// TestRendezvousSpreadsMembersEvenly: the members are spread over the replicas in proportion to
// their weights whatever the replicas' names (pod names differ in their last characters only),
// each member has exactly one owner, and a replica that joins takes members only for itself.
func TestRendezvousSpreadsMembersEvenly(t *testing.T) {
	const members = 3000
	h := sharder.NewHRW()
	for _, tc := range []struct {
		name    string
		weights map[string]uint32
	}{
		{name: "short ids", weights: map[string]uint32{"r0": 1, "r1": 1, "r2": 1}},
		{name: "pod names", weights: map[string]uint32{"configbundle-hub-7d9f8-abcde": 1, "configbundle-hub-7d9f8-abcdf": 1, "configbundle-hub-7d9f8-abcdg": 1}},
		{name: "weighted", weights: map[string]uint32{"big": 2, "small-1": 1, "small-2": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peers := peerInfos(tc.weights)
			var total uint32
			for _, w := range tc.weights {
				total += w
			}
			count := map[string]int{}
			for i := range members {
				count[owner(h, fmt.Sprintf("member-%d", i), peers)]++
			}
			for id, w := range tc.weights {
				want := float64(members) * float64(w) / float64(total)
				if got := float64(count[id]); got < 0.9*want || got > 1.1*want {
					t.Errorf("replica %s owns %v of %d members, want %.0f ±10%% (all: %v)", id, got, members, want, count)
				}
			}
			if count[""] != 0 {
				t.Errorf("%d members have no owner", count[""])
			}
		})
	}
	t.Run("a replica joins", func(t *testing.T) {
		before := peerInfos(map[string]uint32{"r0": 1, "r1": 1, "r2": 1})
		after := append(before[:len(before):len(before)], sharder.PeerInfo{ID: "r3", Weight: 1})
		moved := 0
		for i := range members {
			m := fmt.Sprintf("member-%d", i)
			was, is := owner(h, m, before), owner(h, m, after)
			if was != is {
				moved++
				if is != "r3" {
					t.Fatalf("member %s moved from %s to %s, not to the new replica", m, was, is)
				}
			}
		}
		if want := members / 4; moved < want*9/10 || moved > want*11/10 {
			t.Errorf("%d members moved to the new replica, want about %d", moved, want)
		}
	})
}
