package spokeprovider

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// outcome is what a transition of member returns, whichever it is: the next action (next),
// the retry delay (failAttempt), the replaced connection (activate), and what a probe
// changed (recordProbe).
type outcome struct {
	connect            bool
	retryIn            time.Duration
	old                *connection
	changed, recovered bool
}

// TestMemberTransitions: each row is a member in a start state, one input (a transition
// method), and the state and next action it leads to.
func TestMemberTransitions(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const maxDelay, threshold = 5 * time.Second, 2
	expiry := t0.Add(24 * time.Hour)
	conns := map[string]*connection{}
	conn := func(hash string) *connection { // one connection per kubeconfig
		if conns[hash] == nil {
			conns[hash] = &connection{hash: hash, version: "v1.36.0", clusterID: "uid", expiry: expiry}
		}
		return conns[hash]
	}
	down := errors.New("connection refused")

	// Start states.
	fresh := func() *member { return newMember("ns", "m") }
	connecting := func(h string) func() *member {
		return func() *member { m := fresh(); m.startAttempt(h); return m }
	}
	backingOff := func(h string) func() *member {
		return func() *member {
			m := connecting(h)()
			m.failAttempt(h, hubv1alpha1.UnreachableReason, "down", time.Time{}, t0, maxDelay)
			return m
		}
	}
	refusedWith := func(h string) func() *member {
		return func() *member {
			m := connecting(h)()
			m.refuse(h, hubv1alpha1.ExecPluginNotAllowedReason, "exec")
			return m
		}
	}
	connected := func(h string) func() *member {
		return func() *member { m := connecting(h)(); m.activate(conn(h), t0); return m }
	}
	rotating := func(from, to string) func() *member { // connected with from, connecting to
		return func() *member { m := connected(from)(); m.startAttempt(to); return m }
	}
	probedErr := func(start func() *member, n int) func() *member { // n failed probes of "a"
		return func() *member {
			m := start()
			for range n {
				m.recordProbe(conn("a"), "", down, t0, threshold)
			}
			return m
		}
	}
	forbidden := func() *member {
		m := connected("a")()
		m.recordProbe(conn("a"), "", missingRightsError(nil), t0, threshold)
		return m
	}
	rotationFailed := func() *member {
		m := rotating("a", "b")()
		m.failAttempt("b", hubv1alpha1.UnreachableReason, "down", time.Time{}, t0, maxDelay)
		return m
	}

	// Inputs.
	next := func(h string, at time.Time) func(*member) outcome {
		return func(m *member) outcome { c, in := m.next(h, at); return outcome{connect: c, retryIn: in} }
	}
	startConnecting := func(h string) func(*member) outcome {
		return func(m *member) outcome { m.startAttempt(h); return outcome{} }
	}
	fail := func(h string, refusedExpiry time.Time) func(*member) outcome {
		return func(m *member) outcome {
			return outcome{retryIn: m.failAttempt(h, hubv1alpha1.UnreachableReason, "down", refusedExpiry, t0, maxDelay)}
		}
	}
	refuse := func(h string) func(*member) outcome {
		return func(m *member) outcome {
			m.refuse(h, hubv1alpha1.ExecPluginNotAllowedReason, "exec")
			return outcome{}
		}
	}
	connect := func(h string) func(*member) outcome {
		return func(m *member) outcome { return outcome{old: m.activate(conn(h), t0)} }
	}
	probe := func(c func() *connection, version string, err error) func(*member) outcome {
		return func(m *member) outcome {
			changed, recovered := m.recordProbe(c(), version, err, t0.Add(time.Second), threshold)
			return outcome{changed: changed, recovered: recovered}
		}
	}
	connA := func() *connection { return conn("a") }

	tests := []struct {
		name   string
		start  func() *member
		input  func(*member) outcome
		phase  phase
		ready  bool
		reason string
		want   outcome
	}{
		// next: what to do with the Secret's kubeconfig.
		{"a new member connects", fresh, next("a", t0), "", false, hubv1alpha1.ConnectingReason, outcome{connect: true}},
		{"connecting waits for its attempt", connecting("a"), next("a", t0), phaseConnecting, false, hubv1alpha1.ConnectingReason, outcome{}},
		{"a new kubeconfig while connecting connects it", connecting("a"), next("b", t0), phaseConnecting, false, hubv1alpha1.ConnectingReason, outcome{connect: true}},
		{"backing off waits until its retry", backingOff("a"), next("a", t0.Add(time.Second)), phaseBackingOff, false, hubv1alpha1.UnreachableReason, outcome{retryIn: time.Second}},
		{"backing off retries when due", backingOff("a"), next("a", t0.Add(retryBaseDelay)), phaseBackingOff, false, hubv1alpha1.UnreachableReason, outcome{connect: true}},
		{"a new kubeconfig while backing off connects at once", backingOff("a"), next("b", t0), phaseBackingOff, false, hubv1alpha1.UnreachableReason, outcome{connect: true}},
		{"refused stays refused", refusedWith("a"), next("a", t0.Add(time.Hour)), phaseRefused, false, hubv1alpha1.ExecPluginNotAllowedReason, outcome{}},
		{"a new kubeconfig after a refusal connects", refusedWith("a"), next("b", t0), phaseRefused, false, hubv1alpha1.ExecPluginNotAllowedReason, outcome{connect: true}},
		{"connected stays", connected("a"), next("a", t0), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{}},
		{"a new kubeconfig while connected connects it", connected("a"), next("b", t0), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{connect: true}},

		// connecting, connectFailed, refused: attempts and their failures.
		{"an attempt is Connecting", fresh, startConnecting("a"), phaseConnecting, false, hubv1alpha1.ConnectingReason, outcome{}},
		{"a retry keeps saying why it failed", backingOff("a"), startConnecting("a"), phaseConnecting, false, hubv1alpha1.UnreachableReason, outcome{}},
		{"a new kubeconfig is Connecting again", backingOff("a"), startConnecting("b"), phaseConnecting, false, hubv1alpha1.ConnectingReason, outcome{}},
		{"a failure backs off 2 seconds", connecting("a"), fail("a", time.Time{}), phaseBackingOff, false, hubv1alpha1.UnreachableReason, outcome{retryIn: retryBaseDelay}},
		{"a second failure doubles the back-off", backingOff("a"), fail("a", time.Time{}), phaseBackingOff, false, hubv1alpha1.UnreachableReason, outcome{retryIn: 2 * retryBaseDelay}},
		{"a new kubeconfig's failure starts the back-off afresh", func() *member { m := backingOff("a")(); m.startAttempt("b"); return m }, fail("b", time.Time{}), phaseBackingOff, false, hubv1alpha1.UnreachableReason, outcome{retryIn: retryBaseDelay}},
		{"a refused kubeconfig is refused for good", connecting("a"), refuse("a"), phaseRefused, false, hubv1alpha1.ExecPluginNotAllowedReason, outcome{}},
		{"a rotation that fails keeps the member Ready", rotating("a", "b"), fail("b", time.Time{}), phaseBackingOff, true, hubv1alpha1.RotationFailedReason, outcome{retryIn: retryBaseDelay}},
		{"a rotation refused keeps the member Ready", rotating("a", "b"), refuse("b"), phaseRefused, true, hubv1alpha1.RotationFailedReason, outcome{}},

		// connected: make before break.
		{"the first connection replaces none", connecting("a"), connect("a"), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{}},
		{"a rotation replaces the old connection", rotating("a", "b"), connect("b"), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{old: conn("a")}},
		{"a failed rotation's success clears the failure", rotationFailed, connect("b"), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{old: conn("a")}},

		// probed: the active connection's health.
		{"one failed probe is below the threshold", connected("a"), probe(connA, "", down), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{}},
		{"failed probes at the threshold are Unreachable", probedErr(connected("a"), 1), probe(connA, "", down), phaseConnected, false, hubv1alpha1.UnreachableReason, outcome{changed: true}},
		{"an Unreachable member stays so", probedErr(connected("a"), 2), probe(connA, "", down), phaseConnected, false, hubv1alpha1.UnreachableReason, outcome{}},
		{"an Unreachable member that answers recovers", probedErr(connected("a"), 2), probe(connA, "v1.36.0", nil), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{changed: true, recovered: true}},
		{"a blip below the threshold is a recovery, no change", probedErr(connected("a"), 1), probe(connA, "v1.36.0", nil), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{recovered: true}},
		{"a refused credential is Forbidden at once", connected("a"), probe(connA, "", apierrors.NewUnauthorized("Unauthorized")), phaseConnected, false, hubv1alpha1.ForbiddenReason, outcome{changed: true}},
		{"a right refused is Forbidden at once", connected("a"), probe(connA, "", missingRightsError(nil)), phaseConnected, false, hubv1alpha1.ForbiddenReason, outcome{changed: true}},
		{"a Forbidden member allowed again recovers", forbidden, probe(connA, "v1.36.0", nil), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{changed: true, recovered: true}},
		{"a missing CRD is CRDMissing at once", connected("a"), probe(connA, "", &connectError{reason: hubv1alpha1.CRDMissingReason, err: errors.New("gone")}), phaseConnected, false, hubv1alpha1.CRDMissingReason, outcome{changed: true}},
		{"a new version is a change", connected("a"), probe(connA, "v1.36.1", nil), phaseConnected, true, hubv1alpha1.ConnectedReason, outcome{changed: true}},
		{"a probe of a replaced connection is ignored", rotating("a", "b"), probe(func() *connection { return &connection{hash: "old"} }, "", down), phaseConnecting, true, hubv1alpha1.ConnectedReason, outcome{}},
		{"a recovery keeps saying the rotation failed", probedErr(rotationFailed, 2), probe(connA, "v1.36.0", nil), phaseBackingOff, true, hubv1alpha1.RotationFailedReason, outcome{changed: true, recovered: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := tt.start()
			got := tt.input(m)
			if got != tt.want {
				t.Errorf("outcome = %+v, want %+v", got, tt.want)
			}
			if m.phase != tt.phase || m.state.Ready != tt.ready || m.state.Reason != tt.reason {
				t.Errorf("phase, Ready, reason = %q, %v, %q; want %q, %v, %q", m.phase, m.state.Ready, m.state.Reason, tt.phase, tt.ready, tt.reason)
			}
		})
	}
}

// TestMemberFacts: what a member publishes besides its readiness: the connection's facts once
// connected, the expiry of a credential refused before any connection, and that an engagement
// the manager refused puts the previous connection back.
func TestMemberFacts(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	expiry := t0.Add(-time.Hour)
	m := newMember("ns", "m")
	m.startAttempt("a")
	m.failAttempt("a", hubv1alpha1.ForbiddenReason, "refused", expiry, t0, time.Minute)
	if !m.state.CredentialsExpiry.Equal(expiry) {
		t.Errorf("a refused credential's expiry before any connection: %v, want %v", m.state.CredentialsExpiry, expiry)
	}

	a := &connection{hash: "a", version: "v1.36.0", clusterID: "uid-1", expiry: t0.Add(time.Hour)}
	m.startAttempt("a")
	m.activate(a, t0)
	want := State{Ready: true, Reason: hubv1alpha1.ConnectedReason, Message: connectedMessage, KubernetesVersion: "v1.36.0",
		ClusterID: "uid-1", LastSeen: t0, CredentialsExpiry: a.expiry, SecretNamespace: "ns", SecretName: "m"}
	if m.state != want {
		t.Errorf("connected state = %+v, want %+v", m.state, want)
	}
	if m.attempting("a") {
		t.Errorf("attempting(a) = true once connected with a")
	}

	b := &connection{hash: "b"}
	m.startAttempt("b")
	if !m.attempting("b") {
		t.Errorf("attempting(b) = false while connecting b")
	}
	m.activate(b, t0)
	m.undoActivate(b, a)
	if m.active != a || m.phase != phaseConnecting || !m.attempting("b") {
		t.Errorf("after a refused engagement: active %v, phase %q; want the previous connection, connecting b", m.active.hash, m.phase)
	}
	m.failures = 1
	if changed, recovered := m.recordProbe(b, "", errors.New("down"), t0, 1); changed || recovered {
		t.Errorf("a probe of the connection whose engagement failed changed the state")
	}
}

// TestMemberKeepsCRDs: what the watch of a member's CRDs finds (keepCRDs), and the probes after
// it, make of the member's published state.
func TestMemberKeepsCRDs(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	conn := &connection{hash: "a", version: "v1.36.0", clusterID: "uid"}
	connected := func() *member { m := newMember("ns", "m"); m.startAttempt("a"); m.activate(conn, t0); return m }
	missing := func() *member { m := connected(); m.keepCRDs("The member's CRD was deleted", "", ""); return m }
	unreachable := func() *member {
		m := connected()
		for range 2 {
			m.recordProbe(conn, "", errors.New("connection refused"), t0, 2)
		}
		return m
	}
	keep := func(missing, note string) func(*member) [3]bool {
		return func(m *member) [3]bool {
			changed, wentMissing, recovered := m.keepCRDs(missing, "", note)
			return [3]bool{changed, wentMissing, recovered}
		}
	}
	const newerNote = "its CRD is at revision 2, newer than this hub's 1"
	keepNewer := func(m *member) [3]bool {
		changed, wentMissing, recovered := m.keepCRDs("", newerNote, "")
		return [3]bool{changed, wentMissing, recovered}
	}
	newer := func() *member { m := connected(); keepNewer(m); return m }
	probe := func(m *member) [3]bool {
		changed, recovered := m.recordProbe(conn, "v1.36.0", nil, t0, 2)
		return [3]bool{changed, false, recovered}
	}
	tests := []struct {
		name    string
		start   func() *member
		input   func(*member) [3]bool
		want    [3]bool // changed, wentMissing, recovered
		ready   bool
		reason  string
		message string
	}{
		{"nothing to say changes nothing", connected, keep("", ""), [3]bool{}, true, hubv1alpha1.ConnectedReason, connectedMessage},
		{"a deleted CRD is CRDMissing at once", connected, keep("The member's CRD was deleted", ""), [3]bool{true, true, false}, false, hubv1alpha1.CRDMissingReason, "The member's CRD was deleted"},
		{"said once", missing, keep("The member's CRD was deleted", ""), [3]bool{}, false, hubv1alpha1.CRDMissingReason, "The member's CRD was deleted"},
		{"served again: Ready, a recovery", missing, keep("", ""), [3]bool{true, false, true}, true, hubv1alpha1.ConnectedReason, connectedMessage},
		{"a probe does not make a member missing its CRD Ready", missing, probe, [3]bool{}, false, hubv1alpha1.CRDMissingReason, "The member's CRD was deleted"},
		{"a note goes in the Ready message", connected, keep("", "its CRD differs"), [3]bool{true, false, false}, true, hubv1alpha1.ConnectedReason, connectedMessage + "; but its CRD differs"},
		{"a newer CRD is said, the member Ready", connected, keepNewer, [3]bool{true, false, false}, true, hubv1alpha1.CRDNewerReason, connectedMessage + "; " + newerNote},
		{"a newer CRD upgraded by this hub: Connected again", newer, keep("", ""), [3]bool{true, false, false}, true, hubv1alpha1.ConnectedReason, connectedMessage},
		{"a newer CRD deleted is CRDMissing", newer, keep("The member's CRD was deleted", ""), [3]bool{true, true, false}, false, hubv1alpha1.CRDMissingReason, "The member's CRD was deleted"},
		{"an Unreachable member stays so", unreachable, keep("The member's CRD was deleted", ""), [3]bool{}, false, hubv1alpha1.UnreachableReason, ""},
		{"and answering again, says its CRD is missing", func() *member { m := unreachable(); m.keepCRDs("The member's CRD was deleted", "", ""); return m },
			probe, [3]bool{true, false, false}, false, hubv1alpha1.CRDMissingReason, "The member's CRD was deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := tt.start()
			if got := tt.input(m); got != tt.want {
				t.Errorf("changed, wentMissing, recovered = %v, want %v", got, tt.want)
			}
			if m.state.Ready != tt.ready || m.state.Reason != tt.reason || tt.message != "" && m.state.Message != tt.message {
				t.Errorf("Ready, reason, message = %v, %q, %q; want %v, %q, %q", m.state.Ready, m.state.Reason, m.state.Message, tt.ready, tt.reason, tt.message)
			}
		})
	}
}
