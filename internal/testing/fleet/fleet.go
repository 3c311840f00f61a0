package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
	"configbundle.dev/hub/config"
	"configbundle.dev/hub/internal/testing/controlplane"
	"configbundle.dev/hub/internal/testing/hubprocess"
	"configbundle.dev/hub/pkg/hubmanager"
)

const (
	// HubName is the hub control plane's name, and the name of the unsharded hub process.
	HubName = "hub"
	// DefaultTimeout bounds each wait of the fixture and of `hub register`.
	DefaultTimeout = time.Minute
	// DefaultPoll is how often a wait polls.
	DefaultPoll = 100 * time.Millisecond
)

// Options configure Start. Each field documents its default.
type Options struct {
	// Hub configures the hub's control plane. Its CRDs default to the hub's (config.HubCRDs).
	Hub controlplane.Options
	// Members are the member control planes started with the hub, each with its own options
	// (see controlplane.Named). Defaults to none.
	Members []controlplane.Plane
	// Shared, if set, starts a shared etcd for slim members, which AddSlimMembers adds.
	// Defaults to nil: no shared etcd.
	Shared *controlplane.SharedOptions
	// SecretNamespace is the hub's namespace of member Secrets. Defaults to
	// hubv1alpha1.DefaultSecretNamespace.
	SecretNamespace string
	// HubBinary is the hub binary. Defaults to building it (hubprocess.Build) into Dir, with
	// BuildFlags.
	HubBinary  string
	BuildFlags []string
	// HubArgs are flags of every hub process the fleet starts. Defaults to none.
	HubArgs []string
	// Dir holds the hub processes' logs. Defaults to a new temporary directory, which Close
	// removes unless Keep is set.
	Dir  string
	Keep bool
	// ClientConfig adapts the clients' config of every control plane (a user agent, a rate
	// limit). Defaults to the control plane's config as it is.
	ClientConfig func(*rest.Config) *rest.Config
	// Timeout bounds each wait, a hub's start included, and is register's --timeout in
	// MustRegister. Defaults to DefaultTimeout.
	Timeout time.Duration
	// Poll is how often a wait polls. Defaults to DefaultPoll.
	Poll time.Duration
}

// Member is one member cluster of the fleet.
type Member struct {
	Name string
	// Plane is its control plane.
	Plane *controlplane.ControlPlane
	// Config is the clients' config (Options.ClientConfig applied).
	Config  *rest.Config
	Client  client.WithWatch
	Dynamic dynamic.Interface
}

// Fleet is a running fleet; Close stops all of it.
type Fleet struct {
	// HubPlane is the hub's control plane.
	HubPlane *controlplane.ControlPlane
	// HubConfig and HubKubeconfig reach the hub cluster.
	HubConfig     *rest.Config
	HubKubeconfig string
	Hub           client.WithWatch
	HubDynamic    dynamic.Interface
	Scheme        *runtime.Scheme
	// Binary is the hub binary; Dir holds the hub processes' logs.
	Binary, Dir string
	// Shared is the slim members' shared etcd, nil without Options.Shared.
	Shared *controlplane.Shared

	opts   Options
	planes []*controlplane.ControlPlane // the control planes Start started
	mu     sync.Mutex                   // guards members, byName and hubs
	// members are in the order they were started.
	members []*Member
	byName  map[string]*Member
	hubs    map[string]*hubprocess.Process
}

// Start starts the fleet: the hub's control plane and the members', their clients and the
// Secret namespace; it builds the hub binary unless given one. It starts no hub process (see
// StartHub). On error, whatever it started is stopped.
func Start(ctx context.Context, opts Options) (_ *Fleet, retErr error) {
	opts.SecretNamespace = cmp.Or(opts.SecretNamespace, hubv1alpha1.DefaultSecretNamespace)
	opts.Timeout = cmp.Or(opts.Timeout, DefaultTimeout)
	opts.Poll = cmp.Or(opts.Poll, DefaultPoll)
	f := &Fleet{opts: opts, Binary: opts.HubBinary, Dir: opts.Dir, byName: map[string]*Member{}, hubs: map[string]*hubprocess.Process{}}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, f.Close())
		}
	}()
	var err error
	if f.Scheme, err = hubmanager.Scheme(); err != nil {
		return nil, err
	}
	if f.Dir == "" {
		if f.Dir, err = os.MkdirTemp("", "configbundle-fleet-"); err != nil {
			return nil, err
		}
	}
	if f.Binary == "" {
		if f.Binary, err = hubprocess.Build(f.Dir, opts.BuildFlags...); err != nil {
			return nil, err
		}
	}
	if err := f.startPlanes(ctx); err != nil {
		return nil, err
	}
	if opts.Shared != nil {
		if f.Shared, err = controlplane.StartShared(ctx, *opts.Shared); err != nil {
			return nil, fmt.Errorf("starting the members' shared etcd: %w", err)
		}
	}
	return f, nil
}

// startPlanes starts the hub's and the members' control planes at once, and the clients.
func (f *Fleet) startPlanes(ctx context.Context) error {
	hubOpts := f.opts.Hub
	if hubOpts.CRDs == nil {
		crds, err := config.HubCRDs()
		if err != nil {
			return fmt.Errorf("reading the hub CRDs: %w", err)
		}
		hubOpts.CRDs = crds
	}
	cps, err := controlplane.Start(ctx, append(controlplane.Named(hubOpts, HubName), f.opts.Members...)...)
	if err != nil {
		return fmt.Errorf("starting control planes: %w", err)
	}
	f.planes = cps
	f.HubPlane, cps = cps[0], cps[1:]
	f.HubConfig, f.HubKubeconfig = f.HubPlane.Config, f.HubPlane.KubeconfigPath
	if f.Hub, f.HubDynamic, err = f.clients(f.clientConfig(f.HubConfig)); err != nil {
		return fmt.Errorf("creating the hub's clients: %w", err)
	}
	err = f.Hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.opts.SecretNamespace}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the Secret namespace: %w", err)
	}
	if err := f.installTenancy(ctx); err != nil {
		return fmt.Errorf("installing the tenancy model: %w", err)
	}
	for _, cp := range cps {
		if _, err := f.addMember(cp); err != nil {
			return err
		}
	}
	return nil
}

// clients returns the typed and dynamic clients of a cluster.
func (f *Fleet) clients(cfg *rest.Config) (client.WithWatch, dynamic.Interface, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: f.Scheme})
	if err != nil {
		return nil, nil, err
	}
	d, err := dynamic.NewForConfig(cfg)
	return c, d, err
}

// addMember adds the member of a control plane to the fleet (not to the hub: see Register).
func (f *Fleet) addMember(cp *controlplane.ControlPlane) (*Member, error) {
	m := &Member{Name: cp.Name, Plane: cp, Config: f.clientConfig(cp.Config)}
	var err error
	if m.Client, m.Dynamic, err = f.clients(m.Config); err != nil {
		return nil, fmt.Errorf("creating the clients of %s: %w", cp.Name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = append(f.members, m)
	f.byName[m.Name] = m
	return m, nil
}

func (f *Fleet) clientConfig(cfg *rest.Config) *rest.Config {
	if f.opts.ClientConfig == nil {
		return cfg
	}
	return f.opts.ClientConfig(rest.CopyConfig(cfg))
}

// AddSlimMembers starts slim members on the shared etcd (Options.Shared) and adds them.
func (f *Fleet) AddSlimMembers(ctx context.Context, names ...string) ([]*Member, error) {
	if f.Shared == nil {
		return nil, errors.New("the fleet has no shared etcd: set Options.Shared")
	}
	cps, err := f.Shared.Add(ctx, names...)
	if err != nil {
		return nil, err
	}
	return f.addMembers(cps)
}

// addMembers adds started control planes to the fleet as members, in order.
func (f *Fleet) addMembers(cps []*controlplane.ControlPlane) ([]*Member, error) {
	out := make([]*Member, 0, len(cps))
	for _, cp := range cps {
		m, err := f.addMember(cp)
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Member returns the named member, nil if there is none.
func (f *Fleet) Member(name string) *Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byName[name]
}

// Members returns the members in the order they were started.
func (f *Fleet) Members() []*Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members)
}

// Close stops every hub process, the members and the hub's control plane, and removes Dir
// unless Options.Keep is set (or Options.Dir was given).
func (f *Fleet) Close() error {
	f.StopHubs()
	err := controlplane.StopAll(f.planes)
	if f.Shared != nil {
		err = errors.Join(err, f.Shared.Stop())
	}
	if f.opts.Dir == "" && !f.opts.Keep && f.Dir != "" {
		err = errors.Join(err, os.RemoveAll(f.Dir))
	}
	return err
}
