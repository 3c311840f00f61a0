// Package netproxy is a loopback TCP proxy for tests that need a network partition between a
// client and a server that keeps running: put a Proxy in front of the server, point the client
// at Proxy.Addr, and Partition and Heal the path between them.
//
// A partition is a black hole, the way a dropped network looks to both ends, not a refusal:
//
//   - connections open at Partition stay open but forward no byte in either direction, so that
//     the client's reads and writes hang until its own timeouts fire;
//   - connections the Proxy accepts during the partition (the kernel completes the handshake of
//     a loopback listener) are never forwarded: nothing reaches the server. One the kernel
//     queued during the partition but the Proxy accepts only after Heal is forwarded, as a
//     retried handshake would succeed after a real partition; Conns tells a test that the Proxy
//     has accepted a connection.
//
// Heal resumes forwarding for new connections and closes every connection that existed during
// the partition. That is the choice of this package: a real partition long enough for a client
// to notice ends with its TCP connections timed out or reset, and a client must recover by
// connecting again, which is what a test of recovery wants to exercise. (Resuming those
// connections with the bytes held back would model a blip too short to notice.) HealLeavingDead
// models the other end of a partition: its connections black-holed for good, as behind a
// middlebox that lost their state, which a client notices only through its own keepalives.
//
// Close closes the listener and every connection and returns once no goroutine of the Proxy is
// left. A Proxy is safe for concurrent use.
//
// A BlackHole is the far end of such a path with no server behind it: an address that
// accepts connections and never answers (StartBlackHole), or closes each one at once
// (StartSlammingDoor), for tests of a member whose API server hangs or refuses.
package netproxy
