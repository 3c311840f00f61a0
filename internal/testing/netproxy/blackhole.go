package netproxy

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// BlackHole is a loopback TCP listener that is no server: it accepts every connection and
// either holds it open without a word, as an API server behind a dead network looks to its
// client (StartBlackHole), or closes it at once, as a refusal after the handshake
// (StartSlammingDoor). It records when it accepted each connection. A BlackHole is safe for
// concurrent use.
type BlackHole struct {
	ln   net.Listener
	hold bool
	done chan struct{} // closed when the accepting goroutine ends

	mu      sync.Mutex
	accepts []time.Time
	held    []net.Conn
}

// StartBlackHole listens on 127.0.0.1 on a free port, accepts every connection and never
// answers.
func StartBlackHole() (*BlackHole, error) { return startHole(true) }

// StartSlammingDoor listens on 127.0.0.1 on a free port and closes every connection as soon as
// it accepts it.
func StartSlammingDoor() (*BlackHole, error) { return startHole(false) }

func startHole(hold bool) (*BlackHole, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netproxy: listening: %w", err)
	}
	h := &BlackHole{ln: ln, hold: hold, done: make(chan struct{})}
	go h.accept()
	return h, nil
}

func (h *BlackHole) accept() {
	defer close(h.done)
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.accepts = append(h.accepts, time.Now())
		if h.hold {
			h.held = append(h.held, c)
		}
		h.mu.Unlock()
		if !h.hold {
			_ = c.Close()
		}
	}
}

// Addr returns the address the BlackHole listens on, e.g. "127.0.0.1:41234".
func (h *BlackHole) Addr() string { return h.ln.Addr().String() }

// AcceptedAt returns when the BlackHole accepted each connection so far.
func (h *BlackHole) AcceptedAt() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.accepts...)
}

// Accepted returns how many connections the BlackHole has accepted so far.
func (h *BlackHole) Accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.accepts)
}

// DropConns closes the connections held so far; the BlackHole keeps listening.
func (h *BlackHole) DropConns() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.held {
		_ = c.Close()
	}
	h.held = nil
}

// Close closes the listener and every connection held, and returns once the BlackHole's
// goroutine has ended.
func (h *BlackHole) Close() error {
	err := h.ln.Close()
	<-h.done
	h.DropConns()
	return err
}
