package envd

import (
	"encoding/json"
	"strconv"
	"strings"
)

// The messages of envd's process.proto and filesystem.proto in their protobuf JSON form, written
// by hand (generated code is not committed): field names in lowerCamelCase as protobuf-es writes
// them, bytes in base64, enums as their names, 64-bit integers as strings, oneofs as the one field
// set, default values left out (the SDK fills them).

// process.proto

type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type processSelector struct {
	Pid *uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

type startRequest struct {
	Process *processConfig  `json:"process"`
	Pty     json.RawMessage `json:"pty,omitempty"`
	Tag     *string         `json:"tag,omitempty"`
	Stdin   *bool           `json:"stdin,omitempty"`
}

type connectRequest struct {
	Process *processSelector `json:"process"`
}

type processInput struct {
	Stdin []byte `json:"stdin,omitempty"`
	Pty   []byte `json:"pty,omitempty"`
}

type sendInputRequest struct {
	Process *processSelector `json:"process"`
	Input   *processInput    `json:"input"`
}

type streamInputRequest struct {
	Start *struct {
		Process *processSelector `json:"process"`
	} `json:"start,omitempty"`
	Data *struct {
		Input *processInput `json:"input"`
	} `json:"data,omitempty"`
	Keepalive *struct{} `json:"keepalive,omitempty"`
}

type sendSignalRequest struct {
	Process *processSelector `json:"process"`
	Signal  enum             `json:"signal"`
}

type closeStdinRequest struct {
	Process *processSelector `json:"process"`
}

type updateRequest struct {
	Process *processSelector `json:"process"`
	Pty     json.RawMessage  `json:"pty,omitempty"`
}

type processInfo struct {
	Config processConfig `json:"config"`
	Pid    uint32        `json:"pid"`
	Tag    *string       `json:"tag,omitempty"`
}

type listResponse struct {
	Processes []processInfo `json:"processes"`
}

type processEvent struct {
	Start     *startEvent `json:"start,omitempty"`
	Data      *dataEvent  `json:"data,omitempty"`
	End       *endEvent   `json:"end,omitempty"`
	Keepalive *struct{}   `json:"keepalive,omitempty"`
}

type startEvent struct {
	Pid uint32 `json:"pid"`
}

type dataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
}

type endEvent struct {
	ExitCode int32   `json:"exitCode,omitempty"`
	Exited   bool    `json:"exited,omitempty"`
	Status   string  `json:"status,omitempty"`
	Error    *string `json:"error,omitempty"`
}

// processResponse is StartResponse and ConnectResponse.
type processResponse struct {
	Event processEvent `json:"event"`
}

// Signal values.
const (
	sigTerm = 15
	sigKill = 9
)

// enum is a protobuf enum in JSON: its name or its number.
type enum struct {
	Name   string
	Number int
}

func (e *enum) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &e.Name)
	}
	return json.Unmarshal(b, &e.Number)
}

// filesystem.proto

// File types and event types (their enum names).
const (
	fileTypeFile      = "FILE_TYPE_FILE"
	fileTypeDirectory = "FILE_TYPE_DIRECTORY"
	fileTypeSymlink   = "FILE_TYPE_SYMLINK"

	eventCreate = "EVENT_TYPE_CREATE"
	eventWrite  = "EVENT_TYPE_WRITE"
	eventRemove = "EVENT_TYPE_REMOVE"
)

type entryInfo struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	Path          string  `json:"path"`
	Size          int64s  `json:"size,omitempty"`
	Mode          uint32  `json:"mode,omitempty"`
	Permissions   string  `json:"permissions,omitempty"`
	Owner         string  `json:"owner,omitempty"`
	Group         string  `json:"group,omitempty"`
	ModifiedTime  string  `json:"modifiedTime,omitempty"`
	SymlinkTarget *string `json:"symlinkTarget,omitempty"`
}

// int64s is an int64 written as protobuf JSON writes it: a string.
type int64s int64

func (n int64s) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatInt(int64(n), 10) + `"`), nil
}

type pathRequest struct {
	Path string `json:"path"`
}

type listDirRequest struct {
	Path  string `json:"path"`
	Depth uint32 `json:"depth"`
}

type moveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

type entryResponse struct {
	Entry *entryInfo `json:"entry,omitempty"`
}

type listDirResponse struct {
	Entries []entryInfo `json:"entries"`
}

type watchRequest struct {
	Path               string `json:"path"`
	Recursive          bool   `json:"recursive"`
	IncludeEntry       bool   `json:"includeEntry"`
	AllowNetworkMounts bool   `json:"allowNetworkMounts"`
}

type filesystemEvent struct {
	Name  string     `json:"name"`
	Type  string     `json:"type"`
	Entry *entryInfo `json:"entry,omitempty"`
}

type watchDirResponse struct {
	Start      *struct{}        `json:"start,omitempty"`
	Filesystem *filesystemEvent `json:"filesystem,omitempty"`
	Keepalive  *struct{}        `json:"keepalive,omitempty"`
}

type watcherRequest struct {
	WatcherID string `json:"watcherId"`
}

type createWatcherResponse struct {
	WatcherID string `json:"watcherId"`
}

type watcherEventsResponse struct {
	Events []filesystemEvent `json:"events"`
}

// permissions renders mode as ls does ("-rw-r--r--", "drwxr-xr-x").
func permissions(mode uint32, typ string) string {
	var b strings.Builder
	switch typ {
	case fileTypeDirectory:
		b.WriteByte('d')
	case fileTypeSymlink:
		b.WriteByte('l')
	default:
		b.WriteByte('-')
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if mode&(1<<(8-i)) != 0 {
			b.WriteByte(rwx[i])
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}
