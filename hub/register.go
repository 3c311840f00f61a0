package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"configbundle.dev/hub/pkg/registration"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// registerCommand runs `hub register NAME` or `hub unregister NAME`.
func registerCommand(cmd string, args []string) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var (
		memberKubeconfig, memberContext, hubKubeconfig, hubContext string
		opts                                                       registration.Options
	)
	fs.StringVar(&memberKubeconfig, "member-kubeconfig", "", "Kubeconfig with admin access to the member (default: $KUBECONFIG or ~/.kube/config).")
	fs.StringVar(&memberContext, "member-context", "", "Context of --member-kubeconfig to use (default: its current context).")
	fs.StringVar(&hubKubeconfig, "hub-kubeconfig", "", "Kubeconfig of the hub cluster (default: $KUBECONFIG or ~/.kube/config).")
	fs.StringVar(&hubContext, "hub-context", "", "Context of --hub-kubeconfig to use (default: its current context).")
	fs.StringVar(&opts.Server, "server", "", "API server URL the hub uses to reach the member, when it differs from the member kubeconfig's (for example kind's --internal address).")
	fs.StringVar(&opts.SecretNamespace, "secret-namespace", hubv1alpha1.DefaultSecretNamespace, "Hub namespace of the member's kubeconfig Secret (the hub's --secret-namespace).")
	fs.StringVar(&opts.SecretLabel, "secret-label", hubv1alpha1.DefaultSecretLabel, "Label marking the Secret as a member (the hub's --secret-label).")
	fs.StringVar(&opts.SecretKey, "secret-key", hubv1alpha1.DefaultSecretKey, "Data key of the kubeconfig in the Secret (the hub's --secret-key).")
	fs.StringVar(&opts.MemberNamespace, "member-namespace", hubv1alpha1.DefaultSecretNamespace, "Member namespace of the hub's ServiceAccount.")
	fs.DurationVar(&opts.TokenDuration, "token-duration", registration.DefaultTokenDuration, "Requested lifetime of the hub's token; register again before it ends to rotate it.")
	timeout := fs.Duration("timeout", time.Minute, "How long the whole operation may take.")
	fs.Usage = func() {
		if cmd == "register" {
			fmt.Fprintf(fs.Output(), "Usage: hub register NAME [flags]\n\nRegisters a member cluster with the hub in one step: creates a ServiceAccount with least-privilege\nRBAC in the member, obtains a token, checks it, and writes the labelled kubeconfig Secret NAME on the hub.\nRunning it again rotates the token.\n\nFlags:\n")
		} else {
			fmt.Fprintf(fs.Output(), "Usage: hub unregister NAME [flags]\n\nRemoves a member: deletes its kubeconfig Secret on the hub, then the hub's ServiceAccount and RBAC in\nthe member. Nothing the hub reconciled in the member is touched.\n\nFlags:\n")
		}
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fs.Usage()
		return 2
	}
	opts.Name = args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var err error
	if opts.Member, err = loadConfig(memberKubeconfig, memberContext); err != nil {
		fmt.Fprintf(os.Stderr, "hub %s: member kubeconfig: %v\n", cmd, err)
		return 1
	}
	if opts.Hub, err = loadConfig(hubKubeconfig, hubContext); err != nil {
		fmt.Fprintf(os.Stderr, "hub %s: hub kubeconfig: %v\n", cmd, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if cmd == "unregister" {
		if err := registration.Unregister(ctx, opts); err != nil {
			fmt.Fprintf(os.Stderr, "hub unregister: %v\n", err)
			return 1
		}
		fmt.Printf("Unregistered member %s: its Secret is deleted from the hub and the hub's access is removed from the member.\n", opts.Name)
		return 0
	}
	res, err := registration.Register(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hub register: %v\n", err)
		return 1
	}
	fmt.Printf("Registered member %s: Secret %s/%s on the hub, server %s, token valid until %s.\n",
		opts.Name, res.SecretNamespace, res.SecretName, res.Server, res.TokenExpires.Format(time.RFC3339))
	return 0
}

// loadConfig loads a client config the way kubectl does. This runs on the operator's machine
// with the operator's own kubeconfig: unlike the hub, it may use exec plugins and files.
func loadConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}
