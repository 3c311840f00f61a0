package spokeprovider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/pkg/kubeconfig"
)

// connection is a working connection to a member: its started cluster and what was learnt
// while connecting.
type connection struct {
	name      string // the member's
	hash      string
	cluster   cluster.Cluster
	cfg       *rest.Config
	disc      discovery.DiscoveryInterface
	discovery rest.Interface
	ctx       context.Context
	cancel    context.CancelFunc
	clusterID string
	version   string
	crds      *crdWatch // nil without Options.CRDs
	expiry    time.Time // of the credential; zero if it does not say
	// dialer makes every TCP connection of the connection's clients, cache included, so that
	// they can all be closed at once (CloseAll) when the member stops answering.
	dialer *connrotation.Dialer
	// crdNote says why the hub could not apply the CRDs when it connected although the member
	// serves them ("" if it could): the hub may not write them. The Ready message says so for
	// the connection's life.
	crdNote string
	// crdNewer says that a CRD the member serves when it connected is newer than this build's
	// (CRDNewer), which the hub leaves alone; "" if none is. The watch of the CRDs says it
	// afresh from then on.
	crdNewer string
	// guard watches the hub's admission policies in the member (Options.InstallGuard); nil
	// where there is none to watch, and guardState says why.
	guard      *guardWatch
	guardState GuardState
}

// The TCP dialer of a member's clients: client-go's defaults.
const (
	tcpDialTimeout = 30 * time.Second
	tcpKeepAlive   = 30 * time.Second
)

// connectError carries the MemberCluster reason of a failed connection.
type connectError struct {
	reason string
	err    error
	// expiry is when the credential that was refused expires, if it says; zero otherwise.
	expiry time.Time
}

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// classify turns an error into a MemberCluster reason and message.
func classify(err error) (reason, message string) {
	var kerr *kubeconfig.Error
	var cerr *connectError
	switch {
	case errors.As(err, &kerr):
		return kerr.Reason, kerr.Message
	case errors.As(err, &cerr):
		return cerr.reason, cerr.Error()
	}
	return hubv1alpha1.UnreachableReason, err.Error()
}

// requestError wraps an error of a request to the member with its reason. A refusal of a
// credential whose expiry (zero: unknown) has passed says so: the member only answers
// "Unauthorized".
func requestError(what string, err error, expiry time.Time) error {
	if !refused(err) {
		return &connectError{reason: hubv1alpha1.UnreachableReason, err: fmt.Errorf("%s: %w", what, err)}
	}
	return &connectError{reason: hubv1alpha1.ForbiddenReason, err: fmt.Errorf("%s: %s: %w", what, refusal(expiry, time.Now()), err), expiry: expiry}
}

// refused reports whether the member refused the credential (401 or 403).
func refused(err error) bool {
	return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err)
}

// refusal explains a refused credential whose expiry (zero: unknown) is known.
func refusal(expiry, now time.Time) string {
	if !expiry.IsZero() && !now.Before(expiry) {
		return "the member refused the hub's credential, which expired at " + expiry.UTC().Format(time.RFC3339)
	}
	return "the member refused the hub's credential (revoked, or not allowed?)"
}

// dial connects to a member: it checks that the member answers and who it is, makes sure its
// CRDs are there, starts its cluster and warms its caches, all within ctx.
func (p *Provider) dial(ctx context.Context, name, hash string, cfg *rest.Config) (_ *connection, err error) {
	cfg, dialer := withDialer(cfg)
	defer func() {
		if err != nil {
			dialer.CloseAll()
		}
	}()
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, &connectError{reason: hubv1alpha1.InvalidKubeconfigReason, err: err}
	}
	conn := &connection{name: name, hash: hash, cfg: cfg, disc: disc, discovery: disc.RESTClient(), dialer: dialer}
	conn.expiry, _ = kubeconfig.CredentialsExpiry(cfg)
	if conn.version, err = conn.serverVersion(ctx); err != nil {
		return nil, requestError("reading the API server's version", err, conn.expiry)
	}
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, &connectError{reason: hubv1alpha1.InvalidKubeconfigReason, err: err}
	}
	kubeSystem := &corev1.Namespace{}
	if err := direct.Get(ctx, client.ObjectKey{Name: "kube-system"}, kubeSystem); err != nil {
		return nil, requestError("reading namespace kube-system", err, conn.expiry)
	}
	conn.clusterID = string(kubeSystem.UID)
	if err := p.checkRights(ctx, conn); err != nil {
		return nil, err
	}
	if conn.crdNote, conn.crdNewer, err = p.ensureCRDs(ctx, name, cfg, disc, true); err != nil {
		return nil, err
	}

	fenced := p.fenced(name, cfg)
	cl, err := p.newCluster(ctx, fenced)
	if err != nil {
		return nil, err
	}
	conn.cluster = cl
	conn.ctx, conn.cancel = context.WithCancel(p.ctx)
	context.AfterFunc(conn.ctx, dialer.CloseAll)
	defer func() {
		if err != nil {
			conn.cancel()
		}
	}()
	go func() {
		if err := cl.Start(conn.ctx); err != nil {
			p.log.Error(err, "Member cluster stopped", "cluster", name)
		}
	}()
	if err := p.watchKept(ctx, conn, fenced); err != nil {
		return nil, err
	}
	if err := p.warm(ctx, cl); err != nil {
		return nil, err
	}
	return conn, nil
}

// watchKept starts the watches of what the hub keeps in the member of conn, whose cluster is
// started, through its (fenced) config: its CRDs (Options.CRDs) and its admission policies
// (Options.InstallGuard).
func (p *Provider) watchKept(ctx context.Context, conn *connection, fenced *rest.Config) error {
	if len(p.opts.CRDs) > 0 {
		var err error
		if conn.crds, err = p.watchCRDs(ctx, conn.ctx, conn.name, fenced, conn.cluster.GetHTTPClient()); err != nil {
			return &connectError{reason: hubv1alpha1.UnreachableReason, err: err}
		}
	}
	if p.opts.InstallGuard {
		conn.guard, conn.guardState = p.dialGuard(ctx, conn.ctx, conn, fenced, conn.cluster.GetHTTPClient())
	}
	return nil
}

// newCluster builds a member's cluster from its (fenced) config, with the indexes set so far.
func (p *Provider) newCluster(ctx context.Context, cfg *rest.Config) (cluster.Cluster, error) {
	opts := append([]cluster.Option{func(o *cluster.Options) { o.NewClient = p.newClient }}, p.opts.ClusterOptions...)
	cl, err := cluster.New(cfg, opts...)
	if err != nil {
		return nil, &connectError{reason: hubv1alpha1.InvalidKubeconfigReason, err: err}
	}
	for _, i := range p.indexes() {
		if err := cl.GetFieldIndexer().IndexField(ctx, i.obj, i.field, i.extract); err != nil {
			return nil, fmt.Errorf("indexing %s: %w", i.field, err)
		}
	}
	return cl, nil
}

// warm starts the informers of WarmTypes on a started cluster's cache and waits until every one
// has synced. GetInformer blocks until synced only on a cache already started, and cl.Start runs
// in its own goroutine and may not have got that far: WaitForCacheSync waits for the start,
// then for every informer's sync, so that no reconcile reads a cold cache.
func (p *Provider) warm(ctx context.Context, cl cluster.Cluster) error {
	for _, obj := range p.opts.WarmTypes {
		if _, err := cl.GetCache().GetInformer(ctx, obj); err != nil {
			return &connectError{reason: hubv1alpha1.UnreachableReason, err: fmt.Errorf("warming the cache of %T: %w", obj, err)}
		}
	}
	if !cl.GetCache().WaitForCacheSync(ctx) {
		return &connectError{reason: hubv1alpha1.UnreachableReason, err: fmt.Errorf("warming the caches: %w", context.Cause(ctx))}
	}
	return nil
}

// withDialer returns a copy of cfg whose every TCP connection the returned dialer makes, so that
// they can all be closed at once. The clients' transports are then the connection's own
// (client-go caches no transport with a custom dialer): its TCP connections must be closed when
// it fails or ends, or nothing would close them.
func withDialer(cfg *rest.Config) (*rest.Config, *connrotation.Dialer) {
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: tcpDialTimeout, KeepAlive: tcpKeepAlive}).DialContext)
	cfg = rest.CopyConfig(cfg)
	cfg.Dial = dialer.DialContext
	return cfg, dialer
}

// newClient builds a member's client with a request timeout. The cache's watches use the
// cluster's own HTTP client, which has none: a timeout there would cut every watch.
func (p *Provider) newClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	cfg = withTimeout(cfg, p.opts.RequestTimeout)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	opts.HTTPClient = httpClient
	return client.New(cfg, opts)
}

func withTimeout(cfg *rest.Config, timeout time.Duration) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	return cfg
}

// ensureCRDs makes sure the member name of cfg serves the CRDs and, with InstallCRDs, installs
// or upgrades them (installCRD); it waits until the member serves them. Every write goes through
// the member's fence but, while joining (the replica cannot hold the fence yet), the create of
// a CRD the member does not have, which never replaces one. Where writing fails but the member
// serves them, it returns a note saying so; newer says which CRDs are newer than this build's,
// which it leaves alone.
func (p *Provider) ensureCRDs(ctx context.Context, name string, cfg *rest.Config, disc discovery.DiscoveryInterface, joining bool) (note, newer string, err error) {
	if len(p.opts.CRDs) == 0 {
		return "", "", nil
	}
	if p.opts.InstallCRDs {
		newer, err := p.installCRDs(ctx, name, cfg, joining)
		if err != nil {
			if servesCRDs(disc, p.opts.CRDs) { // someone else installed them
				return fmt.Sprintf("the hub could not apply its CRD %s, so it cannot restore it (it needs create and patch on "+
					"customresourcedefinitions named %s): %v", p.opts.CRDs[0].Name, p.opts.CRDs[0].Name, err), "", nil
			}
			return "", "", &connectError{reason: hubv1alpha1.CRDMissingReason,
				err: fmt.Errorf("the member does not serve the CRD %s and installing it failed: %w", p.opts.CRDs[0].Name, err)}
		}
		// Installed: wait until the member serves them.
		if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
			return servesCRDs(disc, p.opts.CRDs), nil
		}); err != nil {
			return "", "", &connectError{reason: hubv1alpha1.CRDMissingReason, err: fmt.Errorf("the CRD %s was applied but is not served yet: %w", p.opts.CRDs[0].Name, err)}
		}
		return "", newer, nil
	}
	if servesCRDs(disc, p.opts.CRDs) {
		return "", "", nil
	}
	return "", "", &connectError{reason: hubv1alpha1.CRDMissingReason,
		err: fmt.Errorf("the member does not serve the CRD %s, and the hub does not install CRDs (--install-crds=false)", p.opts.CRDs[0].Name)}
}

// installCRDs installs or upgrades each CRD in the member name of cfg (installCRD), and says
// which are newer than this build's.
func (p *Provider) installCRDs(ctx context.Context, name string, cfg *rest.Config, joining bool) (newer string, err error) {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	fenced, err := apiextensionsclient.NewForConfig(p.fenced(name, cfg))
	if err != nil {
		return "", err
	}
	var newers []string
	for _, want := range p.opts.CRDs {
		n, err := p.installCRD(ctx, name, cs, fenced, want, joining)
		if err != nil {
			return "", err
		}
		if n != "" {
			newers = append(newers, n)
		}
	}
	return strings.Join(newers, "; "), nil
}

// installCRD reads want's CRD in the member name (with cs, unfenced: a read) and creates it
// where it is missing (createCRD: create only), leaves it alone where its revision is higher
// than this build's (it returns newer, saying so), and applies want over it (applyCRD, with its
// resourceVersion) where its revision is lower or it differs from want. The create leaves
// through cs while joining, before the replica may hold the member's fence, and through fenced
// otherwise; the apply always through fenced, and only if the fence lets it now: otherwise, and
// if the CRD changed meanwhile (a conflict), keepCRDs upgrades it once connected.
func (p *Provider) installCRD(ctx context.Context, name string, cs, fenced apiextensionsclient.Interface, want *apiextensionsv1.CustomResourceDefinition, joining bool) (newer string, err error) {
	live, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		create := fenced
		if joining {
			create = cs // the one unfenced write: a create, which replaces nothing
		}
		_, err := createCRD(ctx, create, want, p.opts.FieldOwner)
		return "", err
	case err != nil:
		return "", fmt.Errorf("reading CRD %s: %w", want.Name, err)
	case newerCRD(live) != "":
		return newerCRD(live), nil
	case crdRevision(live) == hubv1alpha1.MemberCRDRevision && crdDrift(want, live) == "":
		return "", nil
	case !p.opts.Replica.MayWrite(name):
		return "", nil // fenced: keepCRDs upgrades it once the fence lets it
	}
	if _, err := applyCRD(ctx, fenced, want, p.opts.FieldOwner, live.ResourceVersion); err != nil && !apierrors.IsConflict(err) {
		return "", err
	}
	return "", nil
}

// servesCRDs reports, from discovery (which every authenticated user may read), whether the
// member serves every version of every CRD.
func servesCRDs(disc discovery.DiscoveryInterface, crds []*apiextensionsv1.CustomResourceDefinition) bool {
	missing, err := crdsMissing(disc, crds)
	return err == nil && !missing
}

// fenced returns cfg with every write request going through Options.Replica.Fence, or cfg
// itself if the replica fences nothing (Replica.Fenced).
func (p *Provider) fenced(name string, cfg *rest.Config) *rest.Config {
	if !p.opts.Replica.Fenced() {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &fence{next: next, begin: func() (func(), error) { return p.opts.Replica.Fence(name) }, deadline: p.opts.Replica.WriteDeadline}
	})
	return cfg
}

// fence lets a write request leave only if begin allows it, right before it would, and ends
// the write once it is answered; a write still unanswered at its deadline (if deadline is set
// and says one) is abandoned then.
type fence struct {
	next     http.RoundTripper
	begin    func() (end func(), err error)
	deadline func() time.Time
}

func (f *fence) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return f.next.RoundTrip(req)
	}
	end, err := f.begin()
	if err != nil {
		return nil, fmt.Errorf("%s %s refused: %w", req.Method, req.URL.Path, err)
	}
	defer end()
	var d time.Time
	if f.deadline != nil {
		d = f.deadline()
	}
	if d.IsZero() {
		return f.next.RoundTrip(req)
	}
	ctx, cancel := context.WithDeadline(req.Context(), d)
	resp, err := f.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose is a response body that cancels its request's context once it is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	defer b.cancel()
	return b.ReadCloser.Close()
}
