package netproxy_test

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"configbundle.dev/hub/internal/testing/netproxy"
)

const (
	// stallWait is how long a read through a partition must stay unanswered.
	stallWait = 300 * time.Millisecond
	// timeout bounds what must happen promptly: an echo, a close seen by the peer, goroutines
	// ending. Generous for a loaded two-core machine.
	timeout = 10 * time.Second
)

// echoServer is a loopback TCP server that writes back what it reads.
type echoServer struct {
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func startProxy(t *testing.T, target string) *netproxy.Proxy {
	t.Helper()
	p, err := netproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func dial(g Gomega, addr string) net.Conn {
	c, err := net.DialTimeout("tcp", addr, timeout)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// roundTrip writes msg and reads its echo, at the same time (a large msg fills the buffers).
func roundTrip(g Gomega, c net.Conn, msg string) {
	g.Expect(c.SetDeadline(time.Now().Add(timeout))).To(Succeed())
	written := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte(msg))
		written <- err
	}()
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-written).To(Succeed())
	g.Expect(string(buf)).To(Equal(msg))
}

// stalls writes msg and checks that no byte comes back within stallWait.
func stalls(g Gomega, c net.Conn, msg string) {
	_, err := c.Write([]byte(msg))
	g.Expect(err).NotTo(HaveOccurred(), "a black hole takes writes: the kernel buffers them")
	g.Expect(c.SetReadDeadline(time.Now().Add(stallWait))).To(Succeed())
	n, err := c.Read(make([]byte, 1))
	g.Expect(n).To(BeZero())
	var ne net.Error
	g.Expect(errors.As(err, &ne) && ne.Timeout()).To(BeTrue(), "the read times out, got %v", err)
}

// accepted waits until the proxy holds n connections: those dialed have been accepted.
func accepted(g Gomega, p *netproxy.Proxy, n int) {
	g.Eventually(p.Conns).WithTimeout(timeout).WithPolling(time.Millisecond).Should(Equal(n))
}

// closedByPeer checks that the proxy closed c: a read ends at once with EOF or a reset, not a
// timeout.
func closedByPeer(g Gomega, c net.Conn) {
	g.Expect(c.SetReadDeadline(time.Now().Add(timeout))).To(Succeed())
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	g.Expect(errors.As(err, &ne) && ne.Timeout()).To(BeFalse(), "closed, not stalled: %v", err)
}

func TestForwardsBothWaysAndHalfCloses(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())

	c := dial(g, p.Addr())
	defer c.Close()
	roundTrip(g, c, "hello")
	roundTrip(g, c, string(make([]byte, 1<<20))) // more than one buffer

	// The client's end of the stream reaches the server, and the server's comes back.
	_, err := c.Write([]byte("last words"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.(*net.TCPConn).CloseWrite()).To(Succeed())
	g.Expect(c.SetReadDeadline(time.Now().Add(timeout))).To(Succeed())
	rest, err := io.ReadAll(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(rest)).To(Equal("last words"))
}

func TestPartitionStallsAndHealRestores(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	echo := startEcho(t)
	p := startProxy(t, echo.ln.Addr().String())

	before := dial(g, p.Addr())
	defer before.Close()
	roundTrip(g, before, "up")
	g.Expect(echo.accepted.Load()).To(BeEquivalentTo(1))

	p.Partition()
	stalls(g, before, "anyone there?")
	during := dial(g, p.Addr())
	defer during.Close()
	accepted(g, p, 2)
	stalls(g, during, "hello?")
	g.Expect(echo.accepted.Load()).To(BeEquivalentTo(1), "nothing reached the server during the partition")

	p.Heal()
	closedByPeer(g, before)
	closedByPeer(g, during)
	after := dial(g, p.Addr())
	defer after.Close()
	roundTrip(g, after, "back")
	g.Expect(echo.accepted.Load()).To(BeEquivalentTo(2))

	// Partition and Heal again, on the same Proxy.
	p.Partition()
	stalls(g, after, "again?")
	p.Heal()
	closedByPeer(g, after)
	again := dial(g, p.Addr())
	defer again.Close()
	roundTrip(g, again, "back again")
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	g := NewWithT(t)
	echo := startEcho(t)
	base := runtime.NumGoroutine()
	p, err := netproxy.Start(echo.ln.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())

	// A partition healed: every connection that lived through it is closed by Heal.
	idle := dial(g, p.Addr())
	defer idle.Close()
	roundTrip(g, idle, "one")
	stalled := dial(g, p.Addr())
	defer stalled.Close()
	p.Partition()
	stalls(g, stalled, "held")
	held := dial(g, p.Addr())
	defer held.Close()
	accepted(g, p, 3)
	p.Heal()
	for _, c := range []net.Conn{idle, stalled, held} {
		closedByPeer(g, c)
	}

	// Closed during another partition, with a connection in every state: one whose goroutines
	// wait for bytes, one whose goroutine holds bytes back, one accepted and never forwarded.
	waiting := dial(g, p.Addr())
	defer waiting.Close()
	roundTrip(g, waiting, "two")
	holding := dial(g, p.Addr())
	defer holding.Close()
	roundTrip(g, holding, "three")
	p.Partition()
	stalls(g, holding, "held again")
	black := dial(g, p.Addr())
	defer black.Close()
	accepted(g, p, 3)
	g.Expect(runtime.NumGoroutine()).To(BeNumerically(">", base))

	g.Expect(p.Close()).To(Succeed())
	for _, c := range []net.Conn{waiting, holding, black} {
		closedByPeer(g, c)
	}
	_, err = net.DialTimeout("tcp", p.Addr(), timeout)
	g.Expect(err).To(HaveOccurred(), "nothing listens after Close")
	g.Expect(p.Close()).To(Succeed(), "Close twice is harmless")
	// The echo server's goroutines for the proxy's connections end too, once it sees them closed.
	g.Eventually(runtime.NumGoroutine).WithTimeout(timeout).WithPolling(10 * time.Millisecond).Should(BeNumerically("<=", base))
}

func TestUnreachableTargetClosesTheConnection(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	target := ln.Addr().String()
	g.Expect(ln.Close()).To(Succeed()) // nothing listens there now
	p := startProxy(t, target)

	c := dial(g, p.Addr())
	defer c.Close()
	closedByPeer(g, c)
}

func startHole(t *testing.T, start func() (*netproxy.BlackHole, error)) *netproxy.BlackHole {
	t.Helper()
	h, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func TestBlackHoleHoldsAndSlammingDoorCloses(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	hole := startHole(t, netproxy.StartBlackHole)
	c := dial(g, hole.Addr())
	defer c.Close()
	stalls(g, c, "GET /version")
	g.Expect(hole.Accepted()).To(Equal(1))

	// DropConns closes what it holds and keeps listening.
	hole.DropConns()
	closedByPeer(g, c)
	again := dial(g, hole.Addr())
	defer again.Close()
	g.Eventually(hole.Accepted).WithTimeout(timeout).WithPolling(time.Millisecond).Should(Equal(2))
	stalls(g, again, "still there?")

	door := startHole(t, netproxy.StartSlammingDoor)
	before := time.Now()
	slammed := dial(g, door.Addr())
	defer slammed.Close()
	closedByPeer(g, slammed)
	g.Expect(door.AcceptedAt()).To(HaveLen(1))
	g.Expect(door.AcceptedAt()[0]).To(BeTemporally(">=", before))
}

func TestBlackHoleCloseLeavesNoGoroutines(t *testing.T) {
	g := NewWithT(t)
	base := runtime.NumGoroutine()
	hole, err := netproxy.StartBlackHole()
	g.Expect(err).NotTo(HaveOccurred())
	c := dial(g, hole.Addr())
	defer c.Close()
	g.Eventually(hole.Accepted).WithTimeout(timeout).WithPolling(time.Millisecond).Should(Equal(1))

	g.Expect(hole.Close()).To(Succeed())
	closedByPeer(g, c)
	g.Eventually(runtime.NumGoroutine).WithTimeout(timeout).Should(BeNumerically("<=", base))
	_, err = net.DialTimeout("tcp", hole.Addr(), timeout)
	g.Expect(err).To(HaveOccurred(), "the listener is closed")
}
