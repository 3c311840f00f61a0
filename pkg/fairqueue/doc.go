// Package fairqueue is a work queue for a multi-cluster controller that is fair across members:
// one member with a backlog (a storm of new objects, the initial list of thousands, a writer
// fighting the controller) cannot delay another member's work beyond one free worker.
//
// A Queue keeps one sub-queue per member, ordered like controller-runtime's priority queue
// (higher priority first, first in first out within a priority, so that a member's initial list,
// added at low priority, stays behind its own heals), and hands the next item to a worker from
// the member whose head has the highest priority, among those the member with the fewest items
// in flight, among those the member served longest ago. A member never has more than
// MaxInFlightPerMember items handed out and not yet Done, so that a slow or hung member holds at
// most that many workers. Otherwise it behaves as controller-runtime's priority queue, whose
// interface it implements (priorityqueue.PriorityQueue): it de-duplicates items, keeps an item
// handed out from being handed out again before Done (added again meanwhile, it is handed out
// again after Done), takes the highest of the priorities and the earliest of the ready times an
// item is added with, and its ShutDown ends every Get at once. A member's sub-queue is dropped
// when it is empty and idle, as members come and go.
//
// Metrics: the standard workqueue metrics of controller-runtime under Options.Name, and each
// member's depth and queue wait through Options.MemberMetrics.
package fairqueue
