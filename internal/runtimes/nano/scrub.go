package nano

import (
	"bytes"
	"slices"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
)

// Secrets and durable snapshots.
//
// A session's environment (API tokens an agent gives its code) reaches the guest's memory: the
// interpreter's os.environ, strings the code made from it, freed memory not yet reused. A
// snapshot kept in the daemon's memory for rewinds holds it as the live session does; a snapshot
// written to the store (a step made durable, a pause) outlives the session on disk, so every
// value of the session's environment of sandbox.MinSecret bytes or more (sandbox.SecretsOf) is
// overwritten with zero bytes in its memory pages and files first. The price, as in heavy: a value the code kept in a
// variable comes back blank after a resume or a restart; the next run is given the environment
// again.

// scrubbed returns parts with every occurrence of the secrets zeroed in its pages and files: parts
// itself when none occurs, else a copy (parts is shared with the in-memory snapshots). The pages
// are scanned as one buffer, so a secret that spans two adjacent pages is found too.
func scrubbed(parts *engine.SnapshotParts, secrets [][]byte) *engine.SnapshotParts {
	if len(secrets) == 0 {
		return parts
	}
	var out *engine.SnapshotParts
	own := func() *engine.SnapshotParts {
		if out == nil {
			c := *parts
			c.Files = append(parts.Files[:0:0], parts.Files...)
			out = &c
		}
		return out
	}
	var data []byte // the pages as one buffer, when a secret is in them
	all := parts.Bytes()
	for _, sec := range secrets {
		if bytes.Contains(all, sec) {
			if data == nil {
				data = bytes.Clone(all)
			}
			zero(data, sec)
		}
		for i, f := range parts.Files {
			if bytes.Contains(f.Data, sec) {
				o := own()
				if &o.Files[i].Data[0] == &f.Data[0] {
					o.Files[i].Data = bytes.Clone(f.Data)
				}
				zero(o.Files[i].Data, sec)
			}
		}
	}
	if data != nil {
		// Pages are shared between snapshots and never written: the scrubbed ones are new.
		o := own()
		o.Pages = slices.Clone(parts.Pages)
		for k := range o.Pages {
			if p := data[k*engine.SnapshotPage : (k+1)*engine.SnapshotPage : (k+1)*engine.SnapshotPage]; !bytes.Equal(p, parts.Pages[k]) {
				o.Pages[k] = p
			}
		}
	}
	if out == nil {
		return parts
	}
	return out
}

// zero overwrites every occurrence of sec in b with zero bytes.
func zero(b, sec []byte) {
	for i := bytes.Index(b, sec); i >= 0; {
		clear(b[i : i+len(sec)])
		j := bytes.Index(b[i+len(sec):], sec)
		if j < 0 {
			return
		}
		i += len(sec) + j
	}
}
