package sandbox

import (
	"context"
	"fmt"
	"io"
	"time"
)

// files returns the file operations of an open session, or an invalid_request error naming the
// tier when its sessions have none.
func (m *Manager) files(id string) (*session, SessionFiles, error) {
	s, err := m.get(id)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	impl, tier := s.impl, s.info.Tier
	m.mu.Unlock()
	fs, ok := impl.(SessionFiles)
	if !ok {
		hint := "pass files with each run (the run's files field)"
		if ts := m.tiersWith(func(c Capabilities) bool { return c.SessionFiles }); len(ts) > 0 {
			hint += ", or use a " + tierList(ts) + " session"
		}
		return nil, nil, Errorf(KindInvalidRequest, "%s sessions have no file operations between runs", tier).
			WithHint("%s", hint)
	}
	return s, fs, nil
}

// moveForFiles moves an auto session whose tier has no session files to the first tier that has
// them, before a file is written to it (move.go). Other sessions are left alone.
func (m *Manager) moveForFiles(ctx context.Context, id string) error {
	s, err := m.get(id)
	if err != nil || !s.auto {
		return nil // files answers for a missing session
	}
	hasFiles := func() bool {
		c, _ := m.Capabilities(s.info.Tier)
		return c.SessionFiles
	}
	m.mu.Lock()
	stay := !m.movable(s) || hasFiles()
	m.mu.Unlock()
	if stay {
		return nil // once where files live, a write does not wait for the session's runs
	}
	to := m.tiersWith(func(c Capabilities) bool { return c.SessionFiles && c.Sessions })
	if len(to) == 0 {
		return nil // files answers that this tier has none
	}
	s.run.Lock()
	defer s.run.Unlock()
	m.mu.Lock()
	if m.sessions[id] != s || !m.movable(s) || hasFiles() {
		m.mu.Unlock()
		return nil
	}
	s.active = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		s.active = false
		m.mu.Unlock()
	}()
	_, err = m.move(ctx, id, s, to[0], fmt.Sprintf(" to write a file (session files live in %s sessions)", tierList(to)))
	return err
}

// touch marks a session used, so a client that only moves files keeps it from the idle reaper.
func (m *Manager) touch(s *session) {
	m.mu.Lock()
	s.info.LastUsed = time.Now().UTC()
	s.tl.wokeFromHibernation() // the tier restored it for the operation
	m.mu.Unlock()
}

// WriteFile writes content to path in a session's file system, creating parent directories. An
// auto session on a tier without session files moves to one with them first.
func (m *Manager) WriteFile(ctx context.Context, id, path string, content []byte) error {
	p, err := CleanPath(path)
	if err != nil {
		return err
	}
	if int64(len(content)) > m.policy.MaxFileBytes {
		return Errorf(KindInvalidRequest, "file %s is %d bytes, more than the %d a file may have", p, len(content), m.policy.MaxFileBytes).
			WithHint("split the file, or raise limits.max_file_bytes in the daemon's configuration")
	}
	if err := m.moveForFiles(ctx, id); err != nil {
		return err
	}
	s, fs, err := m.files(id)
	if err != nil {
		return err
	}
	defer m.touch(s)
	if err := fs.WriteFile(ctx, p, content); err != nil {
		return fmt.Errorf("session %s: write %s: %w", id, p, err)
	}
	return nil
}

// ReadFile returns the content of path in a session's file system.
func (m *Manager) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	p, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	s, fs, err := m.files(id)
	if err != nil {
		return nil, err
	}
	defer m.touch(s)
	b, err := fs.ReadFile(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("session %s: read %s: %w", id, p, err)
	}
	return b, nil
}

// ListFiles lists everything under path in a session's file system.
func (m *Manager) ListFiles(ctx context.Context, id, path string) ([]FileInfo, error) {
	if path == "" {
		path = WorkDir
	}
	p, err := CleanPath(path)
	if err != nil {
		return nil, err
	}
	s, fs, err := m.files(id)
	if err != nil {
		return nil, err
	}
	defer m.touch(s)
	l, err := fs.ListFiles(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("session %s: list %s: %w", id, p, err)
	}
	return l, nil
}

// RemoveFile removes path (a directory with everything under it) from a session's file system.
func (m *Manager) RemoveFile(ctx context.Context, id, path string) error {
	p, err := CleanPath(path)
	if err != nil {
		return err
	}
	s, fs, err := m.files(id)
	if err != nil {
		return err
	}
	defer m.touch(s)
	if err := fs.RemoveFile(ctx, p); err != nil {
		return fmt.Errorf("session %s: remove %s: %w", id, p, err)
	}
	return nil
}

// Artifact returns a stored artifact's description and content, which the caller closes.
func (m *Manager) Artifact(id string) (Artifact, io.ReadSeekCloser, error) {
	if m.artifacts == nil {
		return Artifact{}, nil, fmt.Errorf("artifact %q (this daemon keeps no artifacts): %w", id, ErrNotFound)
	}
	return m.artifacts.Open(id)
}

// Images lists the images of every runtime that runs images.
func (m *Manager) Images() []ImageInfo {
	out := []ImageInfo{}
	for _, t := range m.tiers {
		if c, ok := t.rt.(Catalog); ok {
			out = append(out, c.Images()...)
		}
	}
	return out
}
