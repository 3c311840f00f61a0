package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// leaseHolders returns the holder of every member's Lease, by member name.
func (s *scaleFleet) leaseHolders(ctx context.Context) (map[string]string, error) {
	list := &coordinationv1.LeaseList{}
	if err := s.Hub.List(ctx, list, client.InNamespace(hubv1alpha1.DefaultSecretNamespace)); err != nil {
		return nil, fmt.Errorf("listing the members' Leases: %w", err)
	}
	holders := map[string]string{}
	for _, l := range list.Items {
		member, ok := strings.CutPrefix(l.Name, hubv1alpha1.MemberLeasePrefix+"-")
		if ok && l.Spec.HolderIdentity != nil {
			holders[member] = *l.Spec.HolderIdentity
		}
	}
	return holders, nil
}

// statusReplicas returns every MemberCluster's status.replica, by member name.
func (s *scaleFleet) statusReplicas(ctx context.Context) (map[string]string, error) {
	list := &hubv1alpha1.MemberClusterList{}
	if err := s.Hub.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing MemberClusters: %w", err)
	}
	out := map[string]string{}
	for _, mc := range list.Items {
		out[mc.Name] = mc.Status.Replica
	}
	return out, nil
}

// leasesHeld reports whether, with sharded replicas, every healthy registered member's Lease is
// held by a running replica (always true for a single hub).
func (s *scaleFleet) leasesHeld(ctx context.Context) bool {
	if len(s.replicas) < 2 {
		return true
	}
	holders, err := s.leaseHolders(ctx)
	if err != nil {
		return false
	}
	for _, m := range s.Members()[:s.healthy] {
		if !slices.ContainsFunc(s.replicas, func(r *hubReplica) bool { return r.ID == holders[m.Name] }) {
			return false
		}
	}
	return true
}

// shares fills in each replica's share of the point's members: all of them for a single hub;
// for sharded replicas, the members whose Lease each holds (and, apart, those whose
// MemberCluster's status.replica names it).
func (s *scaleFleet) shares(ctx context.Context, p *scalePoint) error {
	if len(p.Replica) == 1 {
		p.Replica[0].Share, p.Replica[0].HealthyShare, p.Replica[0].StatusShare = p.Members, p.Healthy, -1
		return nil
	}
	holders, err := s.leaseHolders(ctx)
	if err != nil {
		return err
	}
	statuses, err := s.statusReplicas(ctx)
	if err != nil {
		return err
	}
	healthy := map[string]bool{}
	for _, m := range s.Members()[:p.Healthy] {
		healthy[m.Name] = true
	}
	for i := range p.Replica {
		rc := &p.Replica[i]
		for member, holder := range holders {
			if holder == rc.ID {
				rc.Share++
				if healthy[member] {
					rc.HealthyShare++
				}
			}
		}
		for _, r := range statuses {
			if r == rc.ID {
				rc.StatusShare++
			}
		}
	}
	return nil
}
