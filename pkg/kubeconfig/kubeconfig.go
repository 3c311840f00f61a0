package kubeconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	hubv1alpha1 "configbundle.dev/hub/api/hub/v1alpha1"
)

// Error is why a kubeconfig was refused. Reason is one of the MemberCluster reasons of the hub
// API (InvalidKubeconfigReason, ExecPluginNotAllowedReason, AuthProviderNotAllowedReason,
// FileReferenceNotAllowedReason) and is shown as the reason of the member's Ready condition;
// Message is for a person, names the offending entry, and never contains secrets (no token,
// password, key or certificate data).
//
// Error deliberately wraps no other error: the errors of the YAML/JSON decoder, of
// clientcmd and of net/url can quote the input they failed on (clientcmd prints every user,
// tokens included, when two users share a name; url.Parse echoes a URL with its password),
// so only what this package writes itself ends up in Message.
type Error struct {
	// Reason is one of the hub API's *Reason constants listed above.
	Reason string
	// Message explains the refusal to a person. It never contains secret values.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	return "kubeconfig refused (" + e.Reason + "): " + e.Message
}

func refuse(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// RESTConfig parses a kubeconfig from a Secret and returns a rest.Config for its
// current context (or its only context), refusing, before anything connects, anything that
// would execute a program or read a local file.
//
// Every user, cluster and context of the kubeconfig is checked, not only the ones the current
// context uses: a refused field anywhere refuses the whole kubeconfig. Refused are exec
// credential plugins, auth providers, and the fields that name local files (tokenFile,
// client-certificate, client-key, certificate-authority). Also refused, as
// hubv1alpha1.InvalidKubeconfigReason, are empty or undecodable data, a kubeconfig without clusters or
// contexts, several contexts and no current-context, a current-context or a context reference
// to a cluster or user that is not defined, a server that is not an absolute https:// or
// http:// URL with a host, a proxy-url that is not http, https or socks5, certificate data
// that does not parse, and insecure-skip-tls-verify together with certificate-authority-data.
//
// The returned config has no ExecProvider, no AuthProvider and no file references (no
// BearerTokenFile, CertFile, KeyFile or CAFile). As with client-go, credentials are only put
// into the config when the server is https://; with an http:// server the config is
// anonymous.
//
// Errors are always *Error. Neither the kubeconfig nor the returned config should
// ever be logged or formatted: both hold credentials.
func RESTConfig(data []byte) (*rest.Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, refuse(hubv1alpha1.InvalidKubeconfigReason, "the kubeconfig is empty")
	}
	// clientcmd.Load only decodes: YAML to JSON, JSON into the v1 types, defaulting and
	// conversion to the internal types. It reads no file and runs nothing; LocationOfOrigin
	// (never serialised) stays empty, and resolving relative paths against it is done by the
	// loading rules (ClientConfigLoadingRules.Load, ResolveLocalPaths), which are not used here.
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, refuse(hubv1alpha1.InvalidKubeconfigReason, "%s", describeLoadError(err))
	}

	// Programs and files first, across the whole kubeconfig, so that the reason says what is
	// dangerous even when the kubeconfig is otherwise broken too.
	if kerr := checkNoProgramsOrFiles(cfg); kerr != nil {
		return nil, kerr
	}
	contextName, kerr := validateKubeconfig(cfg)
	if kerr != nil {
		return nil, kerr
	}

	// No ConfigAccess: nothing may persist auth-provider state to a file (there is no auth
	// provider anyway), and the default loading rules, which know about $KUBECONFIG and
	// ~/.kube/config, stay out of the picture. With the file fields refused above, the paths of
	// ClientConfig that open or read files (ConfirmUsable's os.Open of certificate-authority,
	// client-certificate and client-key; the os.ReadFile of tokenFile) are never taken.
	restConfig, err := clientcmd.NewNonInteractiveClientConfig(*cfg, contextName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		// Unreachable after validateKubeconfig as far as we know; the error text of
		// clientcmd is not passed on because some of it quotes the kubeconfig.
		return nil, refuse(hubv1alpha1.InvalidKubeconfigReason, "context %s cannot be turned into a client configuration", quoteInMessage(contextName))
	}
	if kerr := checkSanitisedRESTConfig(restConfig, contextName); kerr != nil {
		return nil, kerr
	}
	// Build the TLS configuration once, as the first connection would. This reads no file
	// (checkSanitisedRESTConfig made sure there are none) and connects nowhere, and it catches
	// anything about the certificate data that the checks above missed.
	if _, err := rest.TLSConfigFor(restConfig); err != nil {
		return nil, refuse(hubv1alpha1.InvalidKubeconfigReason, "the TLS settings of context %s are not usable", quoteInMessage(contextName))
	}
	return restConfig, nil
}

// checkNoProgramsOrFiles refuses every user and cluster of cfg that asks for a program to be
// run or a local file to be read.
func checkNoProgramsOrFiles(cfg *clientcmdapi.Config) *Error {
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		user := cfg.AuthInfos[name]
		if user == nil {
			continue
		}
		if user.Exec != nil {
			return refuse(hubv1alpha1.ExecPluginNotAllowedReason,
				"user %s asks for exec credential plugin %s; the hub never runs programs from a Secret, use a token or a client certificate instead",
				quoteInMessage(name), quoteInMessage(user.Exec.Command))
		}
		if user.AuthProvider != nil {
			return refuse(hubv1alpha1.AuthProviderNotAllowedReason,
				"user %s asks for auth provider %s; the hub never runs auth-provider plugins from a Secret, use a token or a client certificate instead",
				quoteInMessage(name), quoteInMessage(user.AuthProvider.Name))
		}
		for _, ref := range []struct{ field, path, instead string }{
			{"tokenFile", user.TokenFile, "token"},
			{"client-certificate", user.ClientCertificate, "client-certificate-data"},
			{"client-key", user.ClientKey, "client-key-data"},
		} {
			if ref.path != "" {
				return refuse(hubv1alpha1.FileReferenceNotAllowedReason,
					"user %s names the local file %s in %s; the hub never reads its own files on behalf of a Secret, embed the content in %s instead",
					quoteInMessage(name), quoteInMessage(ref.path), ref.field, ref.instead)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		cluster := cfg.Clusters[name]
		if cluster == nil {
			continue
		}
		if cluster.CertificateAuthority != "" {
			return refuse(hubv1alpha1.FileReferenceNotAllowedReason,
				"cluster %s names the local file %s in certificate-authority; the hub never reads its own files on behalf of a Secret, embed the content in certificate-authority-data instead",
				quoteInMessage(name), quoteInMessage(cluster.CertificateAuthority))
		}
	}
	return nil
}

// validateKubeconfig checks that every user, cluster and context of cfg is well-formed and
// returns the name of the context to use.
func validateKubeconfig(cfg *clientcmdapi.Config) (string, *Error) {
	if len(cfg.Clusters) == 0 && len(cfg.AuthInfos) == 0 && len(cfg.Contexts) == 0 {
		return "", refuse(hubv1alpha1.InvalidKubeconfigReason, "the kubeconfig defines no clusters, users or contexts")
	}
	if len(cfg.Clusters) == 0 {
		return "", refuse(hubv1alpha1.InvalidKubeconfigReason, "the kubeconfig defines no clusters")
	}
	if len(cfg.Contexts) == 0 {
		return "", refuse(hubv1alpha1.InvalidKubeconfigReason, "the kubeconfig defines no contexts")
	}

	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		if kerr := validateKubeconfigUser(name, cfg.AuthInfos[name]); kerr != nil {
			return "", kerr
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		if kerr := validateKubeconfigCluster(name, cfg.Clusters[name]); kerr != nil {
			return "", kerr
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Contexts)) {
		if kerr := validateKubeconfigContext(cfg, name, cfg.Contexts[name]); kerr != nil {
			return "", kerr
		}
	}

	switch {
	case cfg.CurrentContext != "":
		if _, ok := cfg.Contexts[cfg.CurrentContext]; !ok {
			return "", refuse(hubv1alpha1.InvalidKubeconfigReason, "current-context %s is not a context of the kubeconfig", quoteInMessage(cfg.CurrentContext))
		}
		return cfg.CurrentContext, nil
	case len(cfg.Contexts) == 1:
		for name := range cfg.Contexts {
			return name, nil
		}
	}
	return "", refuse(hubv1alpha1.InvalidKubeconfigReason,
		"the kubeconfig has %d contexts and no current-context; set current-context to the one the hub should use", len(cfg.Contexts))
}

func validateKubeconfigUser(name string, user *clientcmdapi.AuthInfo) *Error {
	if name == "" {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "the kubeconfig has a user with an empty name")
	}
	if user == nil {
		return nil
	}
	if user.Token != "" && (user.Username != "" || user.Password != "") {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "user %s has both a token and a username/password; keep only one", quoteInMessage(name))
	}
	hasCert, hasKey := len(user.ClientCertificateData) > 0, len(user.ClientKeyData) > 0
	switch {
	case hasCert && !hasKey:
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "user %s has client-certificate-data but no client-key-data", quoteInMessage(name))
	case hasKey && !hasCert:
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "user %s has client-key-data but no client-certificate-data", quoteInMessage(name))
	case hasCert && hasKey:
		if _, err := tls.X509KeyPair(user.ClientCertificateData, user.ClientKeyData); err != nil {
			return refuse(hubv1alpha1.InvalidKubeconfigReason,
				"user %s has client-certificate-data and client-key-data that are not a PEM certificate and its matching private key", quoteInMessage(name))
		}
	}
	if user.Impersonate == "" && (user.ImpersonateUID != "" || len(user.ImpersonateGroups) > 0 || len(user.ImpersonateUserExtra) > 0) {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "user %s asks for as-uid, as-groups or as-user-extra without as (the user to impersonate)", quoteInMessage(name))
	}
	return nil
}

func validateKubeconfigCluster(name string, cluster *clientcmdapi.Cluster) *Error {
	if name == "" {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "the kubeconfig has a cluster with an empty name")
	}
	if cluster == nil || cluster.Server == "" {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "cluster %s has no server", quoteInMessage(name))
	}
	// The URLs are never quoted back: they may carry a password or a token in their user info
	// or query.
	if !strings.Contains(cluster.Server, "://") {
		return refuse(hubv1alpha1.InvalidKubeconfigReason,
			"cluster %s has a server that is not an absolute URL; the hub only connects to https:// or http:// API servers", quoteInMessage(name))
	}
	server, err := url.Parse(cluster.Server)
	if err != nil {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "cluster %s has a server that is not a valid URL", quoteInMessage(name))
	}
	if server.Scheme != "https" && server.Scheme != "http" {
		return refuse(hubv1alpha1.InvalidKubeconfigReason,
			"cluster %s has a server with scheme %s; the hub only connects to https:// or http:// API servers", quoteInMessage(name), quoteInMessage(server.Scheme))
	}
	if server.Opaque != "" || server.Hostname() == "" {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "cluster %s has a server URL without a host", quoteInMessage(name))
	}
	if cluster.ProxyURL != "" {
		proxy, err := url.Parse(cluster.ProxyURL)
		if err != nil {
			return refuse(hubv1alpha1.InvalidKubeconfigReason, "cluster %s has a proxy-url that is not a valid URL", quoteInMessage(name))
		}
		switch proxy.Scheme {
		case "http", "https", "socks5":
		default:
			return refuse(hubv1alpha1.InvalidKubeconfigReason,
				"cluster %s has a proxy-url with scheme %s; only http, https and socks5 proxies are supported", quoteInMessage(name), quoteInMessage(proxy.Scheme))
		}
		if proxy.Opaque != "" || proxy.Hostname() == "" {
			return refuse(hubv1alpha1.InvalidKubeconfigReason, "cluster %s has a proxy-url without a host", quoteInMessage(name))
		}
	}
	if len(cluster.CertificateAuthorityData) > 0 {
		if cluster.InsecureSkipTLSVerify {
			return refuse(hubv1alpha1.InvalidKubeconfigReason,
				"cluster %s sets both insecure-skip-tls-verify and certificate-authority-data; keep only one", quoteInMessage(name))
		}
		if !x509.NewCertPool().AppendCertsFromPEM(cluster.CertificateAuthorityData) {
			return refuse(hubv1alpha1.InvalidKubeconfigReason, "cluster %s has certificate-authority-data that holds no PEM certificate", quoteInMessage(name))
		}
	}
	return nil
}

func validateKubeconfigContext(cfg *clientcmdapi.Config, name string, context *clientcmdapi.Context) *Error {
	if name == "" {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "the kubeconfig has a context with an empty name")
	}
	if context == nil || context.Cluster == "" {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "context %s names no cluster", quoteInMessage(name))
	}
	if _, ok := cfg.Clusters[context.Cluster]; !ok {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "context %s names cluster %s, which the kubeconfig does not define", quoteInMessage(name), quoteInMessage(context.Cluster))
	}
	if context.AuthInfo == "" {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "context %s names no user", quoteInMessage(name))
	}
	if _, ok := cfg.AuthInfos[context.AuthInfo]; !ok {
		return refuse(hubv1alpha1.InvalidKubeconfigReason, "context %s names user %s, which the kubeconfig does not define", quoteInMessage(name), quoteInMessage(context.AuthInfo))
	}
	return nil
}

// checkSanitisedRESTConfig makes sure that what clientcmd built neither runs a program nor reads a file,
// whatever a future client-go might copy into it.
func checkSanitisedRESTConfig(restConfig *rest.Config, contextName string) *Error {
	if restConfig.ExecProvider != nil {
		// Should anyone still hold on to it, make it inert.
		restConfig.ExecProvider.PluginPolicy = clientcmdapi.PluginPolicy{PolicyType: clientcmdapi.PluginPolicyDenyAll}
		return refuse(hubv1alpha1.ExecPluginNotAllowedReason,
			"context %s resolves to an exec credential plugin; the hub never runs programs from a Secret", quoteInMessage(contextName))
	}
	if restConfig.AuthProvider != nil {
		return refuse(hubv1alpha1.AuthProviderNotAllowedReason,
			"context %s resolves to an auth provider; the hub never runs auth-provider plugins from a Secret", quoteInMessage(contextName))
	}
	if restConfig.BearerTokenFile != "" || restConfig.CertFile != "" || restConfig.KeyFile != "" || restConfig.CAFile != "" {
		return refuse(hubv1alpha1.FileReferenceNotAllowedReason,
			"context %s resolves to a local file; the hub never reads its own files on behalf of a Secret", quoteInMessage(contextName))
	}
	return nil
}

var (
	kubeconfigYAMLLineRE     = regexp.MustCompile(`^yaml: line ([0-9]+):`)
	kubeconfigJSONFieldRE    = regexp.MustCompile(`Go struct field ([A-Za-z0-9_.-]{1,128}) of type`)
	kubeconfigDuplicateLists = map[string]string{
		"NamedCluster":   "clusters",
		"NamedAuthInfo":  "users",
		"NamedContext":   "contexts",
		"NamedExtension": "extensions",
	}
)

// describeLoadError says why clientcmd.Load failed without repeating its error, which may quote
// the kubeconfig: only fixed words, line numbers and field paths are taken from it.
func describeLoadError(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "duplicate name") {
		for kind, list := range kubeconfigDuplicateLists {
			if strings.Contains(msg, "*[]"+kind+" into") {
				return "the kubeconfig lists two " + list + " with the same name"
			}
		}
		return "the kubeconfig lists two entries with the same name"
	}
	if m := kubeconfigYAMLLineRE.FindStringSubmatch(msg); m != nil {
		return "the data is not valid YAML or JSON (line " + m[1] + ")"
	}
	if strings.HasPrefix(msg, "yaml: ") {
		return "the data is not valid YAML or JSON"
	}
	if m := kubeconfigJSONFieldRE.FindStringSubmatch(msg); m != nil {
		// "AuthInfo.users.user.token": drop the Go type in front of the YAML path.
		field := m[1]
		if first, rest, ok := strings.Cut(field, "."); ok && first != "" && first[0] >= 'A' && first[0] <= 'Z' {
			field = rest
		}
		return "the kubeconfig field " + field + " has the wrong type"
	}
	if strings.Contains(msg, "illegal base64 data") {
		return "a *-data field of the kubeconfig (certificate-authority-data, client-certificate-data or client-key-data) is not valid base64"
	}
	if strings.Contains(msg, "is registered for version") {
		return "the data is not a kubeconfig: apiVersion and kind must be v1 and Config"
	}
	return "the data is not a kubeconfig (a YAML or JSON clientcmd Config, apiVersion v1)"
}

// quoteInMessage quotes s for a message, shortened so that a hostile kubeconfig cannot blow up a
// condition message.
func quoteInMessage(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return fmt.Sprintf("%q", s)
	}
	cut := maxLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q...", s[:cut])
}
