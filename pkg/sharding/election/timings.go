package election

import "time"

// Timings are the timings of a leader election, all derived from its lease duration: Of is the
// one place that derives them.
type Timings struct {
	// LeaseDuration is how long a Lease lasts without renewal: another candidate takes it
	// over this long after it last saw it renewed.
	LeaseDuration time.Duration
	// RetryPeriod is how often the holder renews the Lease, and a candidate tries to take it: a
	// third of the lease duration.
	RetryPeriod time.Duration
	// RequestTimeout bounds each request of the election: half a retry period (a sixth of the
	// lease duration), so that a request hung on a dead connection ends before the next
	// renewal is due. A request that times out closes the connections to the hub cluster
	// (Lock's onTimeout).
	RequestTimeout time.Duration
	// Margin is taken off the lease duration when judging, on the local clock, until when the
	// holder certainly holds the Lease (Lock.Valid): a tenth of the lease duration, for clocks
	// that run at different rates and for the request's way to the API server.
	Margin time.Duration
	// RenewDeadline is how long the holder keeps trying to renew before client-go gives the
	// Lease up: the lease duration less the margin and one retry period, so that it gives up
	// when its fence lapses, not before: 17/30 of the lease duration, above what client-go
	// requires (more than 1.2 retry periods, less than the lease duration). A cut of the hub
	// connection shorter than the lease duration less the margin, a retry period and a request
	// timeout (40% of it), whenever it starts, loses nothing.
	RenewDeadline time.Duration
}

// Of returns the timings of a leader election whose Lease lasts leaseDuration.
func Of(leaseDuration time.Duration) Timings {
	t := Timings{
		LeaseDuration: leaseDuration,
		RetryPeriod:   leaseDuration / 3,
		Margin:        leaseDuration / 10,
	}
	t.RequestTimeout = t.RetryPeriod / 2
	t.RenewDeadline = leaseDuration - t.Margin - t.RetryPeriod
	return t
}
