package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// What E2B knows of a sandbox and a session does not (template, metadata, timeout) is kept in a
// JSON file when Options.StateFile is set, written whole (to a temporary file, then renamed) after
// every change, so that it survives the daemon as the sessions do. A record whose session is gone
// is dropped when it is next met.

// storedRecord is a record as the state file keeps it.
type storedRecord struct {
	Session   string            `json:"session"`
	Template  string            `json:"template"`
	Alias     string            `json:"alias,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	StartedAt time.Time         `json:"started_at"`
	EndAt     time.Time         `json:"end_at,omitzero"`
	AutoPause bool              `json:"auto_pause,omitempty"`
	Caller    sandbox.Caller    `json:"caller"`
}

// load reads the state file; a missing file is no records.
func (h *Handler) load() error {
	if h.stateFile == "" {
		return nil
	}
	b, err := os.ReadFile(h.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("e2b: %w", err)
	}
	var recs []storedRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		return fmt.Errorf("e2b: %s: %w", h.stateFile, err)
	}
	for _, r := range recs {
		h.sandboxes[r.Session] = &record{sessionID: r.Session, templateID: r.Template, alias: r.Alias, metadata: r.Metadata,
			startedAt: r.StartedAt, endAt: r.EndAt, autoPause: r.AutoPause, caller: r.Caller}
	}
	return nil
}

// save writes the records to the state file. Writes are serialised; a failure is logged (the
// records stay in memory, and the next change tries again).
func (h *Handler) save() {
	if h.stateFile == "" {
		return
	}
	h.saveMu.Lock()
	defer h.saveMu.Unlock()
	h.mu.Lock()
	recs := make([]storedRecord, 0, len(h.sandboxes))
	for _, r := range h.sandboxes {
		recs = append(recs, storedRecord{Session: r.sessionID, Template: r.templateID, Alias: r.alias, Metadata: r.metadata,
			StartedAt: r.startedAt, EndAt: r.endAt, AutoPause: r.autoPause, Caller: r.caller})
	}
	h.mu.Unlock()
	if err := writeJSONFile(h.stateFile, recs); err != nil {
		h.log.Warn("e2b: keeping the sandboxes' records", "file", h.stateFile, "err", err)
	}
}

func writeJSONFile(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".sandboxes-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
