package controlplane

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// auditPolicy records every write request once, when its response is complete, without bodies.
// The reviews of the authentication and authorization APIs (TokenReview, the hub probes'
// SelfSubjectRulesReview, ...) are creates that store nothing: they are no writes, and not
// recorded.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: None
  resources:
  - group: authentication.k8s.io
  - group: authorization.k8s.io
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
`

// Write is one write request a control plane's kube-apiserver served, as its audit log records
// it (Options.AuditWrites).
type Write struct {
	// At is when the response was complete.
	At time.Time
	// Received is when the kube-apiserver received the request.
	Received time.Time
	// Verb is the API verb: create, update, patch, delete or deletecollection.
	Verb string
	// Resource and Subresource name what was written ("configbundles", "status").
	Resource, Subresource string
	// Namespace and Name name the object written, where the request did.
	Namespace, Name string
	// User is the authenticated user name; UserAgent the client's User-Agent header.
	User, UserAgent string
	// Code is the response's HTTP status code.
	Code int
}

// auditEvent is the part of an audit.k8s.io/v1 Event that Write holds.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// auditArgs returns the kube-apiserver flags that log every write to the control plane's audit
// log, writing the policy file first.
func (c *ControlPlane) auditArgs() (map[string]string, error) {
	policy := filepath.Join(c.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("writing the audit policy: %w", err)
	}
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    c.auditLogPath(),
		"audit-log-format":  "json",
		"audit-log-mode":    "blocking",
	}, nil
}

func (c *ControlPlane) auditLogPath() string { return filepath.Join(c.dir, "audit.log") }

// Writes returns the write requests the control plane's kube-apiservers served so far, in the
// order they completed, from the audit log of Options.AuditWrites; nil without it. A request
// is logged when its response is complete, before the client sees it.
func (c *ControlPlane) Writes() ([]Write, error) {
	f, err := os.Open(c.auditLogPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	var writes []Write
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("parsing the audit log: %w", err)
		}
		w := Write{At: e.StageTimestamp, Received: e.RequestReceivedTimestamp, Verb: e.Verb, User: e.User.Username, UserAgent: e.UserAgent}
		if r := e.ObjectRef; r != nil {
			w.Resource, w.Subresource, w.Namespace, w.Name = r.Resource, r.Subresource, r.Namespace, r.Name
		}
		if e.ResponseStatus != nil {
			w.Code = e.ResponseStatus.Code
		}
		writes = append(writes, w)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	return writes, nil
}
