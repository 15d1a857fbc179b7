package mcphost

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"
)

// Server is a registered hosted MCP server.
type Server struct {
	Name string `json:"name"`
	// Image is the heavy image its sandbox runs (node-mcp for the reference servers).
	Image string `json:"image"`
	// Profile is its egress profile; empty: no network.
	Profile string `json:"profile,omitempty"`
	// Command is its command line inside the sandbox; it speaks MCP on stdio.
	Command []string `json:"command"`
	// Allow, when set, lists the only tools that may be called; Deny lists tools that may not.
	Allow []string  `json:"allow,omitempty"`
	Deny  []string  `json:"deny,omitempty"`
	Added time.Time `json:"added"`
}

// nameRE: a server's name is the prefix of its tools on /mcp ("NAME__tool"), so it keeps to the
// characters the spec allows in tool names (A-Z a-z 0-9 _ - .) without '_' runs that would make
// the separator ambiguous.
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// Validate checks a registration.
func (s Server) Validate() error {
	if !nameRE.MatchString(s.Name) {
		return fmt.Errorf("server name %q: use 1-32 lower-case letters, digits and '-'", s.Name)
	}
	if s.Image == "" {
		return errors.New("a hosted server needs an image (--image)")
	}
	if len(s.Command) == 0 {
		return errors.New("a hosted server needs a command (after --)")
	}
	return nil
}

func (m *Manager) serversFile() string { return filepath.Join(m.opts.Dir, "servers.json") }

func (m *Manager) load() error {
	b, err := os.ReadFile(m.serversFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var list []Server
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("%s: %w", m.serversFile(), err)
	}
	for _, s := range list {
		m.servers[s.Name] = s
	}
	return nil
}

// save writes the registry atomically; m.mu held.
func (m *Manager) save() error {
	list := make([]Server, 0, len(m.servers))
	for _, s := range m.servers {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return writeJSON(m.serversFile(), list)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
