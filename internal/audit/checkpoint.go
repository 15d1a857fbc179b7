package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a signed tree head: the Merkle root over the first Size records at Time.
//
// In audit.checkpoints each checkpoint is one JSON line,
//
//	{"size":256,"root":"<base64>","time":"2026-11-22T08:40:00.1Z","note":"<signed note>"}
//
// where note is a signed note (golang.org/x/mod/sumdb/note, the format of the Go checksum
// database and of C2SP's signed-note) whose text is a C2SP tlog-checkpoint body with one
// extension line:
//
//	agentbox-audit
//	256
//	<base64 root>
//	time 2026-11-22T08:40:00.1Z
//
// Only the note is trusted; size, root and time beside it are for people and grep, and Verify
// reports a checkpoint whose plain fields differ from its signed ones.
type Checkpoint struct {
	Size int64     `json:"size"`
	Root tlog.Hash `json:"root"`
	Time time.Time `json:"time"`
	Note string    `json:"note"`
}

// signCheckpoint makes the checkpoint of a tree.
func signCheckpoint(s note.Signer, size int64, root tlog.Hash, t time.Time) (Checkpoint, error) {
	t = t.UTC()
	text := fmt.Sprintf("%s\n%d\n%s\ntime %s\n", keyName, size, root, t.Format(time.RFC3339Nano))
	msg, err := note.Sign(&note.Note{Text: text}, s)
	if err != nil {
		return Checkpoint{}, err
	}
	return Checkpoint{Size: size, Root: root, Time: t, Note: string(msg)}, nil
}

// openCheckpoint checks a checkpoint line's signature with v and returns what it signs.
func openCheckpoint(line []byte, v note.Verifier) (Checkpoint, error) {
	var c Checkpoint
	if err := json.Unmarshal(line, &c); err != nil {
		return c, fmt.Errorf("not a checkpoint: %v", err)
	}
	n, err := note.Open([]byte(c.Note), note.VerifierList(v))
	if err != nil {
		var unknown *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &invalid):
			return c, fmt.Errorf("its signature does not verify with %s+%08x: forged or altered", v.Name(), v.KeyHash())
		case errors.As(err, &unknown):
			return c, fmt.Errorf("it is not signed by %s+%08x (another key signed it)", v.Name(), v.KeyHash())
		}
		return c, fmt.Errorf("not a signed note: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) != 4 || lines[0] != keyName || !strings.HasPrefix(lines[3], "time ") {
		return c, errors.New("its signed text is not an agentbox audit checkpoint")
	}
	size, err1 := strconv.ParseInt(lines[1], 10, 64)
	root, err2 := tlog.ParseHash(lines[2])
	t, err3 := time.Parse(time.RFC3339Nano, strings.TrimPrefix(lines[3], "time "))
	if err1 != nil || err2 != nil || err3 != nil || size < 0 {
		return c, errors.New("its signed text is not an agentbox audit checkpoint")
	}
	if c.Size != size || c.Root != root || !c.Time.Equal(t) {
		return c, fmt.Errorf("its plain fields (size %d, root %s, time %s) differ from what it signs (size %d, root %s, time %s)",
			c.Size, c.Root, c.Time.Format(time.RFC3339Nano), size, root, t.Format(time.RFC3339Nano))
	}
	return Checkpoint{Size: size, Root: root, Time: t.UTC(), Note: c.Note}, nil
}

// checkpointLine encodes c as its line in audit.checkpoints, with the newline.
func checkpointLine(c Checkpoint) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// label names a checkpoint in messages.
func (c Checkpoint) label() string {
	return fmt.Sprintf("checkpoint at size %d signed %s", c.Size, c.Time.Format(time.RFC3339))
}
