// Package kubeconfig sanitises the kubeconfigs the hub is handed in member Secrets. RESTConfig
// turns one into a client configuration, refusing, before anything connects, whatever would
// make the hub run a program (exec credential plugins, auth providers) or read one of its own
// files (tokenFile, client-certificate, client-key, certificate-authority), and whatever is
// malformed. Refusals are *Error values whose Reason is a MemberCluster reason of the hub API
// and whose Message never quotes a secret.
//
// The hub's provider applies it to every Secret; `hub register` applies it to the kubeconfig it
// writes, so that what it registers is what the hub accepts.
package kubeconfig
