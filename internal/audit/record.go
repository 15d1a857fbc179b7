package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox-dev/agentbox/api"
)

// Kind names what a record is about.
type Kind string

// Record kinds. The session and run kinds mirror sandbox's AuditKind values.
const (
	KindSessionCreate Kind = "session.create"
	KindSessionClose  Kind = "session.close"
	KindSessionExpire Kind = "session.expire"
	KindRun           Kind = "run"
	// Time travel: a session rewound, forked, paused or resumed.
	KindSessionRewind Kind = "session.rewind"
	KindSessionFork   Kind = "session.fork"
	KindSessionPause  Kind = "session.pause"
	KindSessionResume Kind = "session.resume"
	// KindSessionAdopt: a cluster node took a session whose node was gone or drained.
	KindSessionAdopt Kind = "session.adopt"
	KindEgress       Kind = "egress"
	KindPolicyChange Kind = "policy.change"
	// KindAlert is the log speaking about itself: Open found the file altered.
	KindAlert Kind = "alert"
	// KindRepair records that Open cut a torn last line (a write the daemon did not finish).
	KindRepair Kind = "log.repair"
	// KindDaemonRestart records that the daemon started after one that did not shut down
	// cleanly, and the sessions that one lost (written by the daemon, internal/daemon/restart.go).
	KindDaemonRestart Kind = "daemon.restart"
	// The gateway of the hosted MCP servers (internal/mcphost, wired in internal/daemon/mcphost.go):
	// a tool call, the first tool definitions pinned, a change of them refused, a person's approval;
	// a resource read, a prompt got, a list with something redacted or flagged in it.
	KindMCPCall    Kind = "mcp.call"
	KindMCPPin     Kind = "mcp.pin"
	KindMCPApprove Kind = "mcp.approve"
	KindMCPRefused Kind = "mcp.refused"
	KindMCPRead    Kind = "mcp.read"
	KindMCPPrompt  Kind = "mcp.prompt"
	KindMCPList    Kind = "mcp.list"
)

// The kind-specific objects of a record are the API's types (package api): one schema for what the
// log writes and what GET /v1/audit serves. Record itself stays here: its hash field is written
// last and left out while the hash is computed (encodeLine); TestRecordMatchesAPI keeps its JSON
// in step with api.AuditRecord.

// Record is one line of the audit log. Append fills Seq, Time, Prev and Hash; the writer fills
// Kind, the top-level fields it has and one kind-specific object.
type Record struct {
	// Seq is the record's 0-based position in the file, which is also its leaf index in the
	// Merkle tree.
	Seq int64 `json:"seq"`
	// Time is when the record was appended, UTC.
	Time     time.Time `json:"time"`
	Kind     Kind      `json:"kind"`
	Session  string    `json:"session,omitempty"`
	Decision string    `json:"decision,omitempty"`
	// Tenant and Agent say who asked (the API key's tenant and agent); empty for the daemon's
	// own tenant and for what the daemon does by itself.
	Tenant string `json:"tenant,omitempty"`
	Agent  string `json:"agent,omitempty"`

	Run       *Run       `json:"run,omitempty"`
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	Egress    *Egress    `json:"egress,omitempty"`
	Policy    *Policy    `json:"policy,omitempty"`
	Alert     *Alert     `json:"alert,omitempty"`
	Repair    *Repair    `json:"repair,omitempty"`
	Restart   *Restart   `json:"restart,omitempty"`
	MCP       *MCP       `json:"mcp,omitempty"`

	// Prev is the Hash of the record before this one; empty for record 0.
	Prev string `json:"prev,omitempty"`
	// Hash is the hex SHA-256 of this record's line without its hash field (see encodeLine).
	// It is always the line's last field.
	Hash string `json:"hash,omitempty"`
}

// Run describes one run of code.
type Run = api.AuditRun

// Limits are a run's or a session's effective limits.
type Limits = api.AuditLimits

// Lifecycle describes a session's creation or end.
type Lifecycle = api.AuditLifecycle

// Egress describes one request a sandbox made to the outside, as the governance proxy saw and
// decided it. The proxy redacts every secret its detectors found before it appends the record;
// Append also masks credential headers (see maskHeaders) and bounds the excerpt.
type Egress = api.AuditEgress

// Policy describes a change of the egress or limits policy.
type Policy = api.AuditPolicy

// Alert is something an operator should look at: the log reporting on itself (source
// "audit"), or the egress gateway's alert on repeated violations (source "egress").
type Alert = api.AuditAlert

// Repair says what Open cut from the end of the file.
type Repair = api.AuditRepair

// Restart says the daemon started after one that did not shut down cleanly, and which sessions
// that one had open.
type Restart = api.AuditRestart

// MCP describes what the gateway of the hosted MCP servers did; its excerpts are redacted by the
// gateway, and Append bounds them.
type MCP = api.AuditMCP

// LostSession is a session of Restart.
type LostSession = api.AuditLostSession

// Size bounds. A record line longer than MaxLine is refused by Append and is an altered record to
// Verify.
const (
	MaxExcerpt = 1024
	MaxLine    = 64 << 10
)

// hashSuffix is how every line ends: `,"hash":"<64 hex digits>"}`.
const (
	hashPrefix = `,"hash":"`
	hashSuffix = len(hashPrefix) + 2*sha256.Size + len(`"}`)
)

// encodeLine writes r (whose Hash must be empty) as one line without its newline, and returns the
// line and the record's hash. The hash covers the JSON object without its hash field, exactly as
// written: the line minus its last hashSuffix bytes, closed with "}". Verify recomputes it from
// the line's bytes, never by encoding again, so the scheme does not depend on how encoding/json
// writes a value.
func encodeLine(r *Record) (line []byte, hash string, err error) {
	if r.Hash != "" {
		return nil, "", errors.New("audit: record already has a hash")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, "", fmt.Errorf("audit: encode record: %w", err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	sum := sha256.Sum256(body)
	hash = hex.EncodeToString(sum[:])
	line = make([]byte, 0, len(body)+hashSuffix)
	line = append(line, body[:len(body)-1]...)
	line = append(line, hashPrefix...)
	line = append(line, hash...)
	line = append(line, `"}`...)
	return line, hash, nil
}

// head is what Verify and Query read of every line.
type head struct {
	Seq      *int64    `json:"seq"`
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Session  string    `json:"session"`
	Decision string    `json:"decision"`
	Tenant   string    `json:"tenant"`
	Agent    string    `json:"agent"`
	Prev     string    `json:"prev"`
	Hash     string    `json:"hash"`
}

// parseLine decodes a line's head and checks that its hash matches its content. ok is false when
// the content does not match the hash; err is set when the line is not a record at all.
func parseLine(line []byte) (h head, ok bool, err error) {
	if err := json.Unmarshal(line, &h); err != nil {
		return h, false, fmt.Errorf("not valid JSON: %v", err)
	}
	if h.Seq == nil || h.Kind == "" || h.Time.IsZero() {
		return h, false, errors.New("not a record: seq, time or kind is missing")
	}
	n := len(line) - hashSuffix
	if n < 1 || !bytes.Equal(line[n:n+len(hashPrefix)], []byte(hashPrefix)) || line[len(line)-1] != '}' {
		return h, false, errors.New(`not a record: it does not end with its "hash" field`)
	}
	pre := make([]byte, 0, n+1)
	pre = append(append(pre, line[:n]...), '}')
	sum := sha256.Sum256(pre)
	return h, hex.EncodeToString(sum[:]) == h.Hash, nil
}
