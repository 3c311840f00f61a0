package spokeprovider

import (
	"errors"
	"fmt"
	"time"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// State is what the provider knows of one member: what the hub publishes as its MemberCluster.
type State struct {
	// Ready is true while the member is connected and answers its probes.
	Ready bool
	// Reason and Message explain Ready, with the reasons of the hub API
	// (hubv1alpha1.ConnectedReason, UnreachableReason, ...).
	Reason, Message string
	// KubernetesVersion is the member's gitVersion.
	KubernetesVersion string
	// ClusterID is the uid of the member's kube-system namespace.
	ClusterID string
	// LastSeen is when the member last answered.
	LastSeen time.Time
	// CredentialsExpiry is when the credential of the active connection expires; zero when it
	// does not say.
	CredentialsExpiry time.Time
	// SecretNamespace and SecretName name the member's kubeconfig Secret.
	SecretNamespace, SecretName string
	// Guard says whether the hub's admission policies are in place in the member
	// (Options.InstallGuard); its Status is "" without InstallGuard.
	Guard GuardState
}

// phase is where a member stands with the kubeconfig its Secret holds now.
type phase string

const (
	// phaseConnecting: the kubeconfig is being connected in the background.
	phaseConnecting phase = "connecting"
	// phaseConnected: the active connection uses the kubeconfig.
	phaseConnected phase = "connected"
	// phaseRefused: the kubeconfig was refused (it would run a program, read a file, or is
	// malformed); nothing happens until the Secret changes.
	phaseRefused phase = "refused"
	// phaseBackingOff: connecting with the kubeconfig failed; it is tried again at retryAt.
	phaseBackingOff phase = "backingOff"
)

const connectedMessage = "Connected; reconciling its ConfigBundles"

// member is one member's lifecycle. Its phase is about the Secret's current kubeconfig (hash);
// independently of it, active is the connection in use, which a new kubeconfig replaces only
// once it works (make before break): a member can be connected with an old kubeconfig while a
// new one is connecting, refused or backing off.
//
// Every field is guarded by Provider.mu; the transition methods are called with it held and
// never block.
type member struct {
	phase   phase
	hash    string        // sha256 of the kubeconfig the phase is about
	retryAt time.Time     // phaseBackingOff: when the kubeconfig may be tried again
	backoff time.Duration // the delay before the last retry of this kubeconfig

	// failReason and failMessage say why the kubeconfig failed (phaseRefused, phaseBackingOff),
	// so that a member connected with a previous one can keep saying that rotation failed.
	failReason, failMessage string

	active   *connection // the connection in use, nil if none
	failures int         // consecutive failed probes of active

	// crdMissing says why the watch of active's CRDs finds one missing ("" if none is),
	// crdNewer that one is newer than this build's (CRDNewer; "" if none is), and crdNote what
	// the Ready message adds about them (the hub may not keep one): see keepCRDs.
	crdMissing, crdNewer, crdNote string

	state State // what is published
}

func newMember(secretNamespace, secretName string) *member {
	return &member{state: State{
		Reason: hubv1alpha1.ConnectingReason, Message: "Connecting to the member",
		SecretNamespace: secretNamespace, SecretName: secretName,
	}}
}

// next says what to do with the Secret's kubeconfig hash: connect it (true), or nothing for
// now (false, and after how long to look again, if ever).
func (m *member) next(hash string, now time.Time) (connect bool, retryIn time.Duration) {
	if hash != m.hash {
		return true, 0 // a new kubeconfig: whatever happened to the previous one is moot
	}
	switch m.phase {
	case phaseBackingOff:
		if now.Before(m.retryAt) {
			return false, m.retryAt.Sub(now)
		}
		return true, 0
	case phaseConnecting, phaseConnected, phaseRefused:
		return false, 0
	}
	return true, 0 // a member that has not started yet
}

// startAttempt starts an attempt with the kubeconfig hash. A new kubeconfig starts afresh
// (Connecting, the shortest back-off); a retry of the same one keeps publishing why it failed,
// so that a member that stays down does not flap between Connecting and its failure.
func (m *member) startAttempt(hash string) {
	if hash != m.hash {
		m.backoff = 0
		if m.active == nil {
			m.state.Ready, m.state.Reason, m.state.Message = false, hubv1alpha1.ConnectingReason, "Connecting to the member"
		}
	}
	m.phase, m.hash = phaseConnecting, hash
}

// attempting reports whether the attempt with hash is still the one wanted: the Secret has not
// moved on to another kubeconfig and the member has not left.
func (m *member) attempting(hash string) bool {
	return m.phase == phaseConnecting && m.hash == hash
}

// refuse records that the kubeconfig hash is refused for good.
func (m *member) refuse(hash, reason, message string) {
	m.phase, m.hash, m.retryAt, m.backoff = phaseRefused, hash, time.Time{}, 0
	m.publishFailure(reason, message)
}

// failAttempt records a failed attempt with hash and returns the delay before the next one:
// 2 seconds, doubling up to maxDelay. A member without a working connection publishes the expiry of a refused credential, so that
// an expired one is reported as such (CredentialsValid False, Expired) before any connection.
func (m *member) failAttempt(hash, reason, message string, refusedExpiry, now time.Time, maxDelay time.Duration) time.Duration {
	m.backoff = min(max(2*m.backoff, retryBaseDelay), maxDelay)
	m.phase, m.hash, m.retryAt = phaseBackingOff, hash, now.Add(m.backoff)
	m.publishFailure(reason, message)
	if m.active == nil && !refusedExpiry.IsZero() {
		m.state.CredentialsExpiry = refusedExpiry
	}
	return m.backoff
}

// publishFailure publishes a failure: a member that is still connected with a previous kubeconfig
// stays Ready and says that rotation failed; one whose connection does not answer stays
// Unreachable, which its probes report.
func (m *member) publishFailure(reason, message string) {
	m.failReason, m.failMessage = reason, message
	switch {
	case m.active != nil && m.state.Ready:
		m.setRotationFailed()
	case m.active == nil:
		m.state.Ready, m.state.Reason, m.state.Message = false, reason, message
	}
}

func (m *member) setRotationFailed() {
	m.state.Reason = hubv1alpha1.RotationFailedReason
	m.state.Message = "The Secret's new kubeconfig failed (" + m.failReason + ": " + m.failMessage + "); still connected with the previous one"
}

// rotationFailed reports whether the Secret's kubeconfig is not the active connection's and
// failed.
func (m *member) rotationFailed() bool {
	return m.active != nil && m.hash != m.active.hash && (m.phase == phaseRefused || m.phase == phaseBackingOff)
}

// activate makes conn the active connection and returns the one it replaces, if any.
func (m *member) activate(conn *connection, now time.Time) (old *connection) {
	old = m.active
	m.phase, m.hash, m.retryAt, m.backoff = phaseConnected, conn.hash, time.Time{}, 0
	m.failReason, m.failMessage = "", ""
	m.active, m.failures = conn, 0
	m.crdMissing, m.crdNewer, m.crdNote = "", conn.crdNewer, conn.crdNote
	m.state = State{
		KubernetesVersion: conn.version, ClusterID: conn.clusterID, LastSeen: now, CredentialsExpiry: conn.expiry,
		SecretNamespace: m.state.SecretNamespace, SecretName: m.state.SecretName, Guard: m.state.Guard,
	}
	if conn.guard == nil && conn.guardState.Status != "" {
		m.state.Guard = conn.guardState // unavailable, or failed: no watch will say otherwise
	}
	m.answering()
	return old
}

// undoActivate undoes activate(conn) after the manager refused to engage conn: old, the
// connection it replaced, is active again, and the attempt with conn's kubeconfig is back to
// connecting, to be recorded as failed.
func (m *member) undoActivate(conn, old *connection) {
	if m.active != conn {
		return
	}
	m.active = old
	if m.phase == phaseConnected && m.hash == conn.hash {
		m.phase = phaseConnecting
	}
}

// recordProbe records a probe of conn and reports whether the published state changed and whether
// the member recovered: answers again after at least one failed probe, whether or not the
// failures reached the threshold and made it Unreachable. A blip too short to be reported can
// still have broken the hub's watches, so a recovery is a reason to look again. Probes of a
// connection that is no longer active are ignored.
func (m *member) recordProbe(conn *connection, version string, err error, now time.Time, threshold int) (changed, recovered bool) {
	if m.active != conn {
		return false, false
	}
	if err != nil {
		m.failures++
		if cerr := (*connectError)(nil); errors.As(err, &cerr) && (cerr.reason == hubv1alpha1.CRDMissingReason || cerr.reason == hubv1alpha1.ForbiddenReason) {
			// Not a blip either: the CRD is gone, and the hub may not install it; or the member
			// refuses the credential, or some right the hub needs.
			before := m.state
			m.state.Ready, m.state.Reason, m.state.Message = false, cerr.reason, cerr.Error()
			return m.state != before, false
		}
		if refused(err) {
			// A refused credential is no network blip: say so at once.
			before := m.state
			m.state.Ready, m.state.Reason = false, hubv1alpha1.ForbiddenReason
			m.state.Message = fmt.Sprintf("%s: %v", refusal(conn.expiry, now), err)
			return m.state != before, false
		}
		if m.failures < threshold || !m.state.Ready {
			return false, false
		}
		m.state.Ready, m.state.Reason = false, hubv1alpha1.UnreachableReason
		m.state.Message = fmt.Sprintf("%d consecutive health probes failed; last: %v", m.failures, err)
		return true, false
	}
	blip := m.failures > 0
	m.failures = 0
	m.state.LastSeen = now
	if version != m.state.KubernetesVersion {
		m.state.KubernetesVersion, changed = version, true
	}
	if !m.state.Ready {
		reason, message := m.state.Reason, m.state.Message
		m.answering()
		return changed || m.state.Ready || m.state.Reason != reason || m.state.Message != message, m.state.Ready
	}
	return changed, blip
}

// answering publishes the state of a member whose active connection answers: Ready (Connected,
// CRDNewer while one of its CRDs is newer than this build's, or RotationFailed), its message with
// what it says of its CRDs, unless the watch of its CRDs finds one missing (CRDMissing).
func (m *member) answering() {
	if m.crdMissing != "" {
		m.state.Ready, m.state.Reason, m.state.Message = false, hubv1alpha1.CRDMissingReason, m.crdMissing
		return
	}
	m.state.Ready, m.state.Reason, m.state.Message = true, hubv1alpha1.ConnectedReason, connectedMessage
	if m.crdNewer != "" {
		m.state.Reason = hubv1alpha1.CRDNewerReason
		m.state.Message += "; " + m.crdNewer
	}
	if m.crdNote != "" {
		m.state.Message += "; but " + m.crdNote
	}
	if m.rotationFailed() {
		m.setRotationFailed()
	}
}

// keepCRDs records what the watch of the active connection's CRDs found: why one is missing
// ("" if none is), that one is newer than this build's ("" if none is) and the note about them. A member whose probes fail keeps saying so (a
// successful probe publishes the rest); otherwise it is CRDMissing while a CRD is missing, and
// Ready again once it is back. It reports whether the published state changed, whether the
// member went missing a CRD, and whether it is Ready again after one was missing (its watches
// may have missed the bundles created meanwhile).
func (m *member) keepCRDs(missing, newer, note string) (changed, wentMissing, recovered bool) {
	before, wasMissing := m.state, m.crdMissing != ""
	m.crdMissing, m.crdNewer, m.crdNote = missing, newer, note
	if !m.state.Ready && m.state.Reason != hubv1alpha1.CRDMissingReason {
		return false, false, false // Unreachable or Forbidden: the probes say so
	}
	m.answering()
	return m.state != before, !wasMissing && missing != "", before.Reason == hubv1alpha1.CRDMissingReason && m.state.Ready
}
