package statusbudget

import (
	"sync"
	"time"
)

// Budget books the status writes of objects by key. The zero value allows no spacing; set
// Interval. A Budget is safe for concurrent use.
type Budget[K comparable] struct {
	// Interval is the least time between two writes of one key that are not transitions.
	Interval time.Duration

	mu   sync.Mutex
	last map[K]time.Time // when each key's last write was booked
}

// Take returns how long a write of key must wait, or zero if it may happen now, and then books
// it. A transition (a change of readiness, say) may always happen now.
func (b *Budget[K]) Take(key K, transition bool) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wait := b.Interval - time.Since(b.last[key]); wait > 0 && !transition {
		return wait
	}
	if b.last == nil {
		b.last = map[K]time.Time{}
	}
	b.last[key] = time.Now()
	return 0
}

// Forget drops what the Budget remembers of key, whose object is gone.
func (b *Budget[K]) Forget(key K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.last, key)
}
