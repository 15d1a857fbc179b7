package sandbox

import "fmt"

// A running command's live side: stdin fed while it runs (Command.OpenStdin) and its output
// followed by a caller that joins later (a client that reconnects to a background process, as
// E2B's envd protocol does). Both act on a command the Manager already keeps, so the command's
// audit record, limits and timeout are those RunCommand gave it.

// WriteCommandStdin writes p to the stdin of command cid of session id, which must have been
// started with OpenStdin and must still run. What a command is given over its life stays within
// MaxCommandStdin (see Command.OpenStdin).
func (m *Manager) WriteCommandStdin(id, cid string, p []byte) error {
	c, err := m.findCommand(id, cid)
	if err != nil {
		return err
	}
	// stdinMu keeps writes in order without holding c.mu (the output's lock) while the runtime
	// carries them.
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	c.mu.Lock()
	ps, err := c.openStdin(id)
	if err == nil && c.stdinSent+len(p) > MaxCommandStdin {
		err = Errorf(KindInvalidRequest, "command %s was given %d bytes on stdin; %d more would pass the %d bytes a command may be given", cid, c.stdinSent, len(p), MaxCommandStdin).
			WithHint("write larger input to a file first and have the command read it (prog < file)")
	}
	if err == nil {
		c.stdinSent += len(p)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := ps.WriteStdin(p); err != nil {
		return fmt.Errorf("command %s: stdin: %w", cid, err)
	}
	return nil
}

// CloseCommandStdin closes the stdin of command cid of session id (end of input). Closing it
// again changes nothing.
func (m *Manager) CloseCommandStdin(id, cid string) error {
	c, err := m.findCommand(id, cid)
	if err != nil {
		return err
	}
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	c.mu.Lock()
	if !c.stdinOpen {
		c.mu.Unlock()
		return nil
	}
	ps, err := c.openStdin(id)
	if err == nil {
		c.stdinOpen = false
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := ps.CloseStdin(); err != nil {
		return fmt.Errorf("command %s: close stdin: %w", cid, err)
	}
	return nil
}

// openStdin returns the process's stdin, or why it has none. The caller holds c.mu.
func (c *command) openStdin(id string) (ProcessStdin, error) {
	select {
	case <-c.done:
		return nil, Errorf(KindConflict, "command %s of session %s has ended; its stdin is closed", c.info.ID, id)
	default:
	}
	ps, ok := c.proc.(ProcessStdin)
	if !c.stdinOpen || !ok {
		return nil, Errorf(KindInvalidRequest, "command %s of session %s has no open stdin", c.info.ID, id).
			WithHint("start the command with its stdin kept open (open_stdin), or give its whole input when it starts (stdin)")
	}
	return ps, nil
}

// FollowCommand hands out to out the output command cid of session id has written so far (its
// stdout, then its stderr, as kept within the session's caps) and then what it writes from now
// on, until leave is called or the command ends (done is closed). No chunk is handed out twice
// or lost in between: the command writes nothing while the follower joins. out must not block
// (OutputSink).
func (m *Manager) FollowCommand(id, cid string, out OutputSink) (info CommandInfo, done <-chan struct{}, leave func(), err error) {
	c, err := m.findCommand(id, cid)
	if err != nil {
		return CommandInfo{}, nil, nil, err
	}
	f := &follower{out: out}
	c.mu.Lock()
	info = c.snapshotLocked()
	if info.Stdout != "" {
		out.Write(StreamStdout, []byte(info.Stdout))
	}
	if info.Stderr != "" {
		out.Write(StreamStderr, []byte(info.Stderr))
	}
	if c.followers == nil {
		c.followers = map[*follower]struct{}{}
	}
	c.followers[f] = struct{}{}
	c.mu.Unlock()
	leave = func() {
		f.mu.Lock()
		f.gone = true
		f.mu.Unlock()
		c.mu.Lock()
		delete(c.followers, f)
		c.mu.Unlock()
	}
	return info, c.done, leave, nil
}
