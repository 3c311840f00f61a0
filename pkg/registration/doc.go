// Package registration registers a member cluster with the ConfigBundle hub in one step, as
// `clusteradm join` or `argocd cluster add` do, and undoes it. Register gives the hub its own,
// least-privileged identity in the member (a ServiceAccount bound to a ClusterRole with exactly
// the rules of config.MemberClusterRole, all server-side applied), requests a token for it with
// the TokenRequest API, renders a self-contained kubeconfig (server, CA data, token; no exec
// plugins, auth-providers or file paths), proves that the credential works against the member
// and only then writes it to the hub as the labelled kubeconfig Secret the hub discovers members
// from. Running Register again rotates the token and updates the Secret in place. Unregister
// deletes that Secret and the identity in the member, and nothing else: namespaces and whatever
// the hub reconciled in the member are left as they are. Neither function prints or logs
// credentials, and no error carries one. In the hub, the Renewer renews the tokens Register
// wrote, through the TokenRequest API, once 80% of their life has passed.
package registration
