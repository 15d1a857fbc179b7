package mcphost

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// Server is a registered hosted MCP server.
type Server struct {
	Name string `json:"name"`
	// Image is the heavy image its sandbox runs (node-mcp for the reference servers).
	Image string `json:"image,omitempty"`
	// Profile is its egress profile; empty: no network (a hosted server), the default profile
	// (a remote one).
	Profile string `json:"profile,omitempty"`
	// Command is its command line inside the sandbox; it speaks MCP on stdio.
	Command []string `json:"command,omitempty"`
	// URL, instead of Image and Command, is a remote server's streamable-HTTP endpoint, reached
	// through the egress gateway under Profile.
	URL string `json:"url,omitempty"`
	// Allow, when set, lists the only tools that may be called; Deny lists tools that may not.
	Allow []string  `json:"allow,omitempty"`
	Deny  []string  `json:"deny,omitempty"`
	Added time.Time `json:"added"`
}

// Remote says the server is reached over the network rather than run by agentbox.
func (s Server) Remote() bool { return s.URL != "" }

// RemoteProfile is the egress profile a remote server is reached under.
func (s Server) RemoteProfile() string {
	if s.Profile == "" {
		return sandbox.DefaultEgressProfile
	}
	return s.Profile
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
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("remote server URL %q: give its streamable-HTTP endpoint, http:// or https://", s.URL)
		}
		if s.Image != "" || len(s.Command) > 0 {
			return errors.New("a remote server (--url) has no image nor command: those are for a server agentbox runs")
		}
		return nil
	}
	if s.Image == "" {
		return errors.New("a hosted server needs an image (--image), or a remote one its URL (--url)")
	}
	if len(s.Command) == 0 {
		return errors.New("a hosted server needs a command (after --)")
	}
	return nil
}

func (m *Manager) serversFile() string { return filepath.Join(m.opts.Dir, "servers.json") }

// fileStamp is what says servers.json changed: its size, time and inode (a rewrite by rename,
// as writeJSON and the CLI do, changes the inode).
type fileStamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func stampOf(st fs.FileInfo) fileStamp {
	s := fileStamp{size: st.Size(), mtime: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s.ino = sys.Ino
	}
	return s
}

// refresh reads servers.json again when it changed since the last read or write, so that a
// server added or removed by another process (the CLI's `agentbox mcp add` beside a running
// daemon) is seen without a restart. A server removed from the file, or whose image, command or
// profile changed, is stopped (a changed one starts again, as registered now, on its next call).
// A file that does not parse leaves the registry as it was, and says why. m.mu held.
func (m *Manager) refresh() error {
	st, err := os.Stat(m.serversFile())
	var stamp fileStamp
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		stamp = stampOf(st)
	}
	if m.loaded && stamp == m.stamp {
		return nil
	}
	servers := map[string]Server{}
	if stamp != (fileStamp{}) {
		b, err := os.ReadFile(m.serversFile())
		if err != nil {
			return err
		}
		var list []Server
		if err := json.Unmarshal(b, &list); err != nil {
			return fmt.Errorf("%s: %w", m.serversFile(), err)
		}
		for _, s := range list {
			servers[s.Name] = s
		}
	}
	for name, old := range m.servers {
		if s, ok := servers[name]; !ok || s.Image != old.Image || s.Profile != old.Profile || s.URL != old.URL || !slices.Equal(s.Command, old.Command) {
			if h := m.hosts[name]; h != nil {
				delete(m.hosts, name)
				go h.stop()
			}
		}
	}
	m.servers, m.stamp, m.loaded = servers, stamp, true
	return nil
}

// fresh is refresh for readers: an unreadable file keeps the registry last read, and is logged
// once per change (the next write of the file is read again).
func (m *Manager) fresh() {
	if err := m.refresh(); err != nil && err.Error() != m.refreshErr {
		m.refreshErr = err.Error()
		m.logf("hosted MCP registry not read again (the servers last read stay): %v", err)
	}
}

// save writes the registry atomically; m.mu held.
func (m *Manager) save() error {
	list := make([]Server, 0, len(m.servers))
	for _, s := range m.servers {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	if err := writeJSON(m.serversFile(), list); err != nil {
		return err
	}
	if st, err := os.Stat(m.serversFile()); err == nil {
		m.stamp = stampOf(st) // our own write is not a change to read again
	}
	return nil
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
