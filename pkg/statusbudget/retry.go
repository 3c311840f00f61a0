package statusbudget

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// MaxRetryDelay caps the back-off of a failed status write on the hub cluster (RateLimiter).
const MaxRetryDelay = 10 * time.Second

// RateLimiter is the rate limiter of the controllers that write status on the hub cluster:
// controller-runtime's default (5 ms doubling per failure of an item, 10 writes per second
// overall, bursts of 100), with each item's back-off capped at MaxRetryDelay rather than
// 1000 s. While the hub cluster refuses connections every write fails at once and the back-off
// doubles again and again: after 60 s of it, the default waited 41 to 82 s more once the hub
// answered; capped, every status is written again within MaxRetryDelay of its answering.
func RateLimiter[T comparable]() workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, MaxRetryDelay),
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
