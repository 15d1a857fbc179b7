package engine

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
)

// The header of a step's delta on the worker's pipe, in a binary layout of its own rather than
// gob: gob describes its types again in every blob (a decoder per blob cannot share them), which
// cost ~28 µs to encode and ~39 µs to decode a typical step's header (370 pages, 68 changed, a
// few files), the encoding on the path between a run's result and the worker reading the next
// run. This layout takes a few microseconds each way (BenchmarkEncodeDelta, BenchmarkDecodeDelta).
// The worker and the daemon are the same binary, and a delta never outlives the pipe, so the
// layout has no version to keep: a blob of another layout fails to decode (deltaMagic).
//
// Layout: deltaMagic, Build (32 bytes), then unsigned varints Size, Relative (0 or 1), the count
// and values of Offsets and of Changed, the count of Files and for each its Path (length, bytes),
// Dir, Perm, Data (length, bytes), Atim, Mtim, Ctim (signed varints), then the Clock: Fixed, Step,
// Wall, Mono (signed) and RNG (length, bytes). Empty byte strings decode as nil, as gob's did.

const deltaMagic = 0xD1

func appendDeltaHeader(b []byte, d *SnapshotDelta) []byte {
	b = append(b, deltaMagic)
	b = append(b, d.Build[:]...)
	b = binary.AppendUvarint(b, uint64(d.Size))
	b = appendBool(b, d.Relative)
	b = appendU32s(b, d.Offsets)
	b = appendU32s(b, d.Changed)
	b = binary.AppendUvarint(b, uint64(len(d.Files)))
	for _, f := range d.Files {
		b = appendBytes(b, []byte(f.Path))
		b = appendBool(b, f.Dir)
		b = binary.AppendUvarint(b, uint64(f.Perm))
		b = appendBytes(b, f.Data)
		b = binary.AppendVarint(b, f.Atim)
		b = binary.AppendVarint(b, f.Mtim)
		b = binary.AppendVarint(b, f.Ctim)
	}
	b = appendBool(b, d.Clock.Fixed)
	b = binary.AppendVarint(b, d.Clock.Step)
	b = binary.AppendVarint(b, d.Clock.Wall)
	b = binary.AppendVarint(b, d.Clock.Mono)
	return appendBytes(b, d.Clock.RNG)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendU32s(b []byte, v []uint32) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	for _, x := range v {
		b = binary.AppendUvarint(b, uint64(x))
	}
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

var errDeltaHeader = errors.New("a malformed delta header")

// deltaReader reads appendDeltaHeader's layout; the first error sticks.
type deltaReader struct {
	b   []byte
	err error
}

func (r *deltaReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errDeltaHeader
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *deltaReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errDeltaHeader
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *deltaReader) bool() bool {
	switch r.uvarint() {
	case 0:
		return false
	case 1:
		return true
	}
	r.err = errDeltaHeader
	return false
}

// count reads a count of things of at least min bytes each, refusing one the rest cannot hold.
func (r *deltaReader) count(min int) int {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)/min) {
		r.err = errDeltaHeader
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *deltaReader) u32s() []uint32 {
	n := r.count(1)
	if n == 0 {
		return nil
	}
	out := make([]uint32, n)
	for k := range out {
		v := r.uvarint()
		if v > math.MaxUint32 {
			r.err = errDeltaHeader
		}
		out[k] = uint32(v)
	}
	return out
}

func (r *deltaReader) bytes() []byte {
	n := r.count(1)
	if n == 0 {
		return nil
	}
	out := append([]byte(nil), r.b[:n]...)
	r.b = r.b[n:]
	return out
}

func decodeDeltaHeader(b []byte, d *SnapshotDelta) error {
	if len(b) < 1+len(d.Build) || b[0] != deltaMagic {
		return errDeltaHeader
	}
	copy(d.Build[:], b[1:])
	r := &deltaReader{b: b[1+len(d.Build):]}
	size := r.uvarint()
	if size > math.MaxInt32*2 {
		r.err = errDeltaHeader
	}
	d.Size = int(size)
	d.Relative = r.bool()
	d.Offsets = r.u32s()
	d.Changed = r.u32s()
	if n := r.count(7); n > 0 {
		d.Files = make([]snapFile, n)
		for k := range d.Files {
			f := &d.Files[k]
			f.Path = string(r.bytes())
			f.Dir = r.bool()
			perm := r.uvarint()
			if perm > math.MaxUint32 {
				r.err = errDeltaHeader
			}
			f.Perm = fs.FileMode(perm)
			f.Data = r.bytes()
			f.Atim, f.Mtim, f.Ctim = r.varint(), r.varint(), r.varint()
		}
	}
	d.Clock.Fixed = r.bool()
	d.Clock.Step, d.Clock.Wall, d.Clock.Mono = r.varint(), r.varint(), r.varint()
	d.Clock.RNG = r.bytes()
	if r.err == nil && len(r.b) != 0 {
		r.err = errDeltaHeader
	}
	return r.err
}
