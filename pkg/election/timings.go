package election

import "time"

// Timings are the timings of a leader election, all derived from its lease duration: Of is the
// one place that derives them.
type Timings struct {
	// LeaseDuration is how long a Lease lasts without renewal: another candidate takes it
	// over this long after it last saw it renewed.
	LeaseDuration time.Duration
	// RetryPeriod is how often the holder renews the Lease, and a candidate tries to take it: a
	// tenth of the lease duration.
	RetryPeriod time.Duration
	// RequestTimeout bounds each request of the election: two retry periods. A request that
	// times out closes the connections to the hub cluster (Lock's onTimeout).
	RequestTimeout time.Duration
	// Margin is taken off the lease duration when judging, on the local clock, until when the
	// holder certainly holds the Lease (Lock.Valid): a tenth of the lease duration, for clocks
	// that run at different rates and for the request's way to the API server.
	Margin time.Duration
	// RenewDeadline is how long the holder keeps trying to renew before client-go gives the
	// Lease up: the lease duration less the margin and one retry period, so that it gives up
	// when its fence lapses, not before. A cut of the hub connection shorter than the lease
	// duration less the margin, a retry period and a request timeout (60% of it), whenever it
	// starts, loses nothing.
	RenewDeadline time.Duration
}

// Of returns the timings of a leader election whose Lease lasts leaseDuration.
func Of(leaseDuration time.Duration) Timings {
	t := Timings{
		LeaseDuration: leaseDuration,
		RetryPeriod:   leaseDuration / 10,
		Margin:        leaseDuration / 10,
	}
	t.RequestTimeout = 2 * t.RetryPeriod
	t.RenewDeadline = leaseDuration - t.Margin - t.RetryPeriod
	return t
}
