package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Kind names what a record is about.
type Kind string

// Record kinds. The session and run kinds mirror sandbox's AuditKind values.
const (
	KindSessionCreate Kind = "session.create"
	KindSessionClose  Kind = "session.close"
	KindSessionExpire Kind = "session.expire"
	KindRun           Kind = "run"
	KindEgress        Kind = "egress"
	KindPolicyChange  Kind = "policy.change"
	// KindAlert is the log speaking about itself: Open found the file altered.
	KindAlert Kind = "alert"
	// KindRepair records that Open cut a torn last line (a write the daemon did not finish).
	KindRepair Kind = "log.repair"
)

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

	Run       *Run       `json:"run,omitempty"`
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
	Egress    *Egress    `json:"egress,omitempty"`
	Policy    *Policy    `json:"policy,omitempty"`
	Alert     *Alert     `json:"alert,omitempty"`
	Repair    *Repair    `json:"repair,omitempty"`

	// Prev is the Hash of the record before this one; empty for record 0.
	Prev string `json:"prev,omitempty"`
	// Hash is the hex SHA-256 of this record's line without its hash field (see encodeLine).
	// It is always the line's last field.
	Hash string `json:"hash,omitempty"`
}

// Run describes one run of code.
type Run struct {
	// CodeSHA256 is the hex SHA-256 of the code; the code itself is not kept.
	CodeSHA256 string   `json:"code_sha256"`
	CodeBytes  int      `json:"code_bytes"`
	Tier       string   `json:"tier,omitempty"`
	Reasons    []string `json:"reasons,omitempty"`
	Limits     *Limits  `json:"limits,omitempty"`
	Packages   []string `json:"packages,omitempty"`
	Image      string   `json:"image,omitempty"`
	// Network says the run could reach out through the egress gateway, under EgressProfile.
	Network       bool   `json:"network,omitempty"`
	EgressProfile string `json:"egress_profile,omitempty"`
	// Outcome is ok, exception, exit_nonzero or error.
	Outcome    string  `json:"outcome"`
	Exception  string  `json:"exception,omitempty"`
	ExitCode   int     `json:"exit_code"`
	ErrorKind  string  `json:"error_kind,omitempty"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// Limits are a run's or a session's effective limits.
type Limits struct {
	TimeoutMS   int64 `json:"timeout_ms"`
	MemoryBytes int64 `json:"memory_bytes"`
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	FilesBytes  int64 `json:"files_bytes"`
}

// Lifecycle describes a session's creation or end.
type Lifecycle struct {
	Tier     string   `json:"tier,omitempty"`
	Limits   *Limits  `json:"limits,omitempty"`
	Packages []string `json:"packages,omitempty"`
	Image    string   `json:"image,omitempty"`
	// Network and EgressProfile as in Run.
	Network       bool    `json:"network,omitempty"`
	EgressProfile string  `json:"egress_profile,omitempty"`
	Reason        string  `json:"reason,omitempty"`
	Runs          int     `json:"runs,omitempty"`
	AgeMS         float64 `json:"age_ms,omitempty"`
	ErrorKind     string  `json:"error_kind,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// Egress describes one request a sandbox made to the outside, as the governance proxy saw and
// decided it. The proxy redacts every secret its detectors found before it appends the record;
// Append also masks credential headers (see maskHeaders) and bounds the excerpt.
type Egress struct {
	Method string `json:"method"`
	// URL is the request's URL; for a tunnel, the host and port.
	URL string `json:"url"`
	// Addr is the address dialed, when one was.
	Addr string `json:"addr,omitempty"`
	// Status is the origin's status code, or the gateway's own when it refused; 0 when there
	// was no answer.
	Status int `json:"status,omitempty"`
	// Decision is the gateway's own: allowed, denied, blocked (DLP), redacted, warned, refused
	// (SSRF guard) or failed (the origin could not be reached). The record's top-level decision
	// is the same in the common vocabulary (allow, deny, redact, warn).
	Decision string `json:"decision"`
	// Profile, Mode and Intent are the egress profile, its mode and the session's intent then.
	Profile string `json:"profile,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Intent  string `json:"intent,omitempty"`
	// Rules and Detectors name the policy rules that matched and the DLP detectors that fired;
	// Reason says why, for people.
	Rules     []string `json:"rules,omitempty"`
	Detectors []string `json:"detectors,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	// Headers are the request's headers, secrets redacted.
	Headers map[string]string `json:"headers,omitempty"`
	// BodyExcerpt is the start of the request body, secrets redacted, at most MaxExcerpt bytes.
	BodyExcerpt string  `json:"body_excerpt,omitempty"`
	DurationMS  float64 `json:"duration_ms,omitempty"`
}

// Policy describes a change of the egress or limits policy.
type Policy struct {
	// Actor is who changed it (an API key's name, "config file").
	Actor   string `json:"actor,omitempty"`
	Summary string `json:"summary"`
	// Error says why a change was refused.
	Error string `json:"error,omitempty"`
	// Before and After are the policy documents, as JSON.
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// Alert is something an operator should look at: the log reporting on itself (source
// "audit"), or the egress gateway's alert on repeated violations (source "egress").
type Alert struct {
	Source  string `json:"source"`
	Message string `json:"message"`
	// Egress alerts: the profile, how many violations within which window, and whether the
	// session was ended for them.
	Profile    string `json:"profile,omitempty"`
	Violations int    `json:"violations,omitempty"`
	Window     string `json:"window,omitempty"`
	Ended      bool   `json:"ended,omitempty"`
}

// Repair says what Open cut from the end of the file.
type Repair struct {
	// Line is the 1-based line number the torn bytes started on.
	Line  int64 `json:"line"`
	Bytes int64 `json:"bytes"`
	// SHA256 is the hex hash of the bytes cut; Excerpt is their start (at most MaxExcerpt bytes).
	SHA256  string `json:"sha256"`
	Excerpt string `json:"excerpt,omitempty"`
	Reason  string `json:"reason"`
}

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
