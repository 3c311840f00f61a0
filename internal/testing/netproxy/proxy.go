package netproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds the connection to the target of one accepted connection.
const dialTimeout = 10 * time.Second

// Proxy forwards the TCP connections it accepts on a loopback address to a target address,
// until it is partitioned.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // canceled by Close: ends the dials under way
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the Proxy started

	mu          sync.Mutex
	partitioned bool
	closed      bool
	links       map[*link]struct{} // the open connections
}

// link is one accepted connection and, once dialed, its connection to the target. Its fields
// other than done are guarded by Proxy.mu.
type link struct {
	client, server net.Conn      // server is nil until dialed
	blackHoled     bool          // it existed during a partition: it forwards nothing, Heal closes it
	halfClosed     bool          // one direction has ended with EOF and was passed on
	done           chan struct{} // closed when the link is closed
}

// Start listens on 127.0.0.1 on a free port and forwards every connection to target, a
// host:port.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netproxy: listening: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address the Proxy listens on, e.g. "127.0.0.1:41234".
func (p *Proxy) Addr() string {
	return p.ln.Addr().String()
}

// Conns returns the number of connections the Proxy has accepted and holds open, forwarding or
// black-holed.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Partition black-holes the path to the target: open connections stay open and forward
// nothing more in either direction; new ones are accepted and never forwarded. A chunk a
// connection was already writing when Partition was called may still arrive.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partitioned = true
	for l := range p.links {
		l.blackHoled = true
	}
}

// Heal ends a partition: every connection that existed during it is closed (its peers see a
// reset or EOF), and new connections are forwarded again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partitioned = false
	for l := range p.links {
		if l.blackHoled {
			p.dropLocked(l)
		}
	}
}

// HealLeavingDead ends a partition for new connections only: those that existed during it stay
// open and black-holed for good, as behind a middlebox that lost their state, and a client
// notices only through its own timeouts or keepalives.
func (p *Proxy) HealLeavingDead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partitioned = false
}

// Close closes the listener and every connection, and returns once every goroutine of the
// Proxy has ended. It returns the error of closing the listener.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	p.cancel()
	err := p.ln.Close()
	for l := range p.links {
		p.dropLocked(l)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// accept accepts connections until the listener is closed (or fails: a loopback listener's
// Accept fails only when it is closed or the process is out of file descriptors).
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		l := &link{client: c, done: make(chan struct{}), blackHoled: p.partitioned}
		p.links[l] = struct{}{}
		if !l.blackHoled { // a black-holed connection needs no goroutine: nothing reads it
			p.wg.Add(1)
			go p.forward(l)
		}
		p.mu.Unlock()
	}
}

// forward connects l to the target and copies bytes both ways. A connection that cannot reach
// the target is closed.
func (p *Proxy) forward(l *link) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.target)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, open := p.links[l]; !open || err != nil { // closed meanwhile, by Heal or Close
		if server != nil {
			_ = server.Close()
		}
		p.dropLocked(l)
		return
	}
	l.server = server
	p.wg.Add(2)
	go p.pipe(l, server, l.client)
	go p.pipe(l, l.client, server)
}

// pipe copies src to dst while l is not black-holed.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.pass(l) { // neither the bytes nor the end of the stream go through a black hole
			return
		}
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				p.drop(l)
				return
			}
		}
		if err != nil {
			p.ended(l, dst, err)
			return
		}
	}
}

// pass reports whether l may forward what it read; if l is black-holed, it first waits for l to
// be closed.
func (p *Proxy) pass(l *link) bool {
	p.mu.Lock()
	blackHoled := l.blackHoled
	p.mu.Unlock()
	if blackHoled {
		<-l.done
	}
	return !blackHoled
}

// ended passes on the end of one direction of l: EOF half-closes dst, until both directions
// have ended; any other error closes l.
func (p *Proxy) ended(l *link, dst net.Conn, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tcp, ok := dst.(*net.TCPConn)
	if !errors.Is(err, io.EOF) || !ok || l.halfClosed || tcp.CloseWrite() != nil {
		p.dropLocked(l)
		return
	}
	l.halfClosed = true
}

func (p *Proxy) drop(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(l)
}

// dropLocked closes l, once; the goroutines reading it see errors and end.
func (p *Proxy) dropLocked(l *link) {
	if _, open := p.links[l]; !open {
		return
	}
	delete(p.links, l)
	close(l.done)
	_ = l.client.Close()
	if l.server != nil {
		_ = l.server.Close()
	}
}
