package mcphost

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/internal/promptscan"
)

// Pin is the recorded tool definitions of a server, bound to its image.
type Pin struct {
	Server    string `json:"server"`
	ImageHash string `json:"image_hash"`
	// Hash covers the image hash and every tool's hash.
	Hash  string            `json:"hash"`
	Tools map[string]string `json:"tools"` // tool name → SHA-256 of its definition
	// Flagged lists tools whose description the prompt scanner flagged, with its rules.
	Flagged  map[string][]string `json:"flagged,omitempty"`
	Pinned   time.Time           `json:"pinned"`
	Approved bool                `json:"approved,omitempty"` // pinned by `agentbox mcp approve`
}

// pinOf hashes a tools/list of a server run from imageHash.
func pinOf(server, imageHash string, tools []*mcp.Tool) Pin {
	p := Pin{Server: server, ImageHash: imageHash, Tools: map[string]string{}}
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		def, _ := json.Marshal(t) // name, title, description, schemas, annotations, meta
		sum := sha256.Sum256(def)
		p.Tools[t.Name] = hex.EncodeToString(sum[:])
		names = append(names, t.Name)
		if r := promptscan.ScanText([]byte(t.Title + "\n" + t.Description + "\n" + string(schemaText(t)))); r.Flagged() {
			if p.Flagged == nil {
				p.Flagged = map[string][]string{}
			}
			p.Flagged[t.Name] = r.Rules()
		}
	}
	sort.Strings(names)
	h := sha256.New()
	h.Write([]byte("image=" + imageHash + "\n"))
	for _, n := range names {
		h.Write([]byte(n + "=" + p.Tools[n] + "\n"))
	}
	p.Hash = hex.EncodeToString(h.Sum(nil))
	return p
}

func schemaText(t *mcp.Tool) []byte {
	b, _ := json.Marshal(t.InputSchema)
	return b
}

// diff says what changed from old to p, for the refusal and the approval's record.
func (p Pin) diff(old Pin) []string {
	var out []string
	if old.ImageHash != p.ImageHash {
		out = append(out, "image "+short(old.ImageHash)+" → "+short(p.ImageHash))
	}
	for n, h := range p.Tools {
		switch oh, ok := old.Tools[n]; {
		case !ok:
			out = append(out, "tool "+n+" added")
		case oh != h:
			out = append(out, "tool "+n+" changed")
		}
	}
	for n := range old.Tools {
		if _, ok := p.Tools[n]; !ok {
			out = append(out, "tool "+n+" removed")
		}
	}
	sort.Strings(out)
	return out
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func (m *Manager) pinFile(name string) string {
	return filepath.Join(m.opts.Dir, "pins", name+".json")
}

func (m *Manager) readPin(name string) (Pin, bool, error) {
	b, err := os.ReadFile(m.pinFile(name))
	if errors.Is(err, os.ErrNotExist) {
		return Pin{}, false, nil
	}
	if err != nil {
		return Pin{}, false, err
	}
	var p Pin
	err = json.Unmarshal(b, &p)
	return p, err == nil, err
}
