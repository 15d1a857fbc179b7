package mcphost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Record is one audit record of the gateway: a tool call, a pin or an approval.
type Record struct {
	Time time.Time `json:"time"`
	// Kind: "mcp.call", "mcp.pin", "mcp.approve", "mcp.refused" (pinning).
	Kind   string `json:"kind"`
	Server string `json:"server"`
	Tool   string `json:"tool,omitempty"`
	// Intent is the intent in force during the call; Session the session the call named.
	Intent  string `json:"intent,omitempty"`
	Session string `json:"session,omitempty"`
	// Decision: allow, redact, block, deny, refuse (pinning), error.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// ArgsSHA256 and ResultSHA256 are digests of the arguments and result as they were (before
	// any redaction); the excerpts have every DLP finding redacted.
	ArgsSHA256    string   `json:"args_sha256,omitempty"`
	ArgsExcerpt   string   `json:"args_excerpt,omitempty"`
	ResultSHA256  string   `json:"result_sha256,omitempty"`
	ResultExcerpt string   `json:"result_excerpt,omitempty"`
	Findings      []string `json:"findings,omitempty"` // detector[:rule]@where
	Flagged       []string `json:"flagged,omitempty"`  // prompt-scanner rules, "description:" or "result:" first
	DurationMS    float64  `json:"duration_ms,omitempty"`
	// ServerMS is the part of DurationMS the server took to answer (the round trip to its
	// process, or to the remote server): the rest is the gateway's. In this file only (bench mcp
	// reads it), not in the signed log.
	ServerMS float64  `json:"server_ms,omitempty"`
	PinHash  string   `json:"pin_hash,omitempty"`
	Changes  []string `json:"changes,omitempty"`
}

// fileAudit appends records as JSON lines.
type fileAudit struct {
	mu   sync.Mutex
	path string
	f    *os.File // kept open between records: opening it for each was a cost of every call
}

func (a *fileAudit) write(r Record) {
	b, _ := json.Marshal(r)
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	for try := 0; try < 2; try++ {
		if a.f == nil {
			_ = os.MkdirAll(filepath.Dir(a.path), 0o700)
			f, err := os.OpenFile(a.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err != nil {
				return
			}
			a.f = f
		}
		if _, err := a.f.Write(b); err == nil {
			return
		}
		a.f.Close() // and open it again once
		a.f = nil
	}
}

func (a *fileAudit) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func excerpt(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
