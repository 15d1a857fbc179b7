package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	wasi "github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// WASI preview 1 errno values this file returns.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoInval   = 28
	errnoIntr    = 27
	errnoIO      = 29
	errnoNospc   = 51
	errnoNotsup  = 58
)

// WASI event types.
const (
	eventClock   = 0
	eventFdRead  = 1
	eventFdWrite = 2
)

// noSpaceFuncs are the WASI functions through which the private file system can run out of
// space. Wazero's errno set has no ENOSPC (it turns the file system's error into EIO); these are
// wrapped to turn that EIO back into ENOSPC when the file system said it was full.
var noSpaceFuncs = []string{"fd_write", "fd_pwrite", "path_open", "path_create_directory", "fd_filestat_set_size"}

// instantiateWASI builds the wasi_snapshot_preview1 host module: wazero's functions, with
// poll_oneoff replaced (wazero's rejects absolute clock waits, which CPython's time.sleep uses,
// and cannot be interrupted) and the writers wrapped for ENOSPC. HostModuleBuilder.Export of a
// name replaces an earlier export of it.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	// Wazero's own implementations, to wrap: compile a copy of the module and take its functions.
	orig := rt.NewHostModuleBuilder(wasi.ModuleName)
	wasi.NewFunctionExporter().ExportFunctions(orig)
	cm, err := orig.Compile(ctx)
	if err != nil {
		return fmt.Errorf("engine: compile wasi: %w", err)
	}
	defer cm.Close(ctx)
	defs := cm.ExportedFunctions()

	b := rt.NewHostModuleBuilder(wasi.ModuleName)
	wasi.NewFunctionExporter().ExportFunctions(b)
	i32 := api.ValueTypeI32
	b.NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(pollOneoff), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		WithParameterNames("in", "out", "nsubscriptions", "result.nevents").
		WithResultNames("errno").
		Export("poll_oneoff")
	wrap := map[string]func(api.GoModuleFunction) api.GoModuleFunction{
		// The fd table is host state a reset does not restore: a run that closes or renumbers
		// descriptors leaves an instance that cannot be reset (see Instance.Reset).
		"fd_close":    closeWrap,
		"fd_renumber": renumberWrap,
		"fd_read":     readWrap,
	}
	for _, name := range noSpaceFuncs {
		wrap[name] = noSpaceWrap
	}
	for name, w := range wrap {
		def, ok := defs[name]
		if !ok {
			return fmt.Errorf("engine: wazero has no wasi function %s", name)
		}
		fn, ok := def.GoFunction().(api.GoModuleFunction)
		if !ok {
			return fmt.Errorf("engine: wasi function %s is not a Go function", name)
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(w(fn), def.ParamTypes(), def.ResultTypes()).
			WithParameterNames(def.ParamNames()...).
			WithResultNames(def.ResultNames()...).
			Export(name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("engine: instantiate wasi: %w", err)
	}
	return nil
}

func noSpaceWrap(fn api.GoModuleFunction) api.GoModuleFunction {
	return api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		inst := instanceOf(ctx)
		if inst == nil {
			fn.Call(ctx, mod, stack)
			return
		}
		inst.noSpace.Store(false)
		fn.Call(ctx, mod, stack)
		if uint32(stack[0]) == errnoIO && inst.noSpace.Load() {
			stack[0] = errnoNospc
		}
	})
}

// closeWrap marks the instance as not resettable when the guest closes one of the standard
// streams or the pre-opened directory: those are wazero's descriptors, and a reset instance must
// find them where its memory expects them. Closing a file the guest opened itself is fine (the
// file system counts its open files).
func closeWrap(fn api.GoModuleFunction) api.GoModuleFunction {
	return api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		if inst := instanceOf(ctx); inst != nil && uint32(stack[0]) <= firstGuestFD {
			inst.tainted.Store(true)
		}
		fn.Call(ctx, mod, stack)
	})
}

// renumberWrap marks the instance as not resettable: a renumbered descriptor table is host
// state a reset does not restore.
func renumberWrap(fn api.GoModuleFunction) api.GoModuleFunction {
	return api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		if inst := instanceOf(ctx); inst != nil {
			inst.tainted.Store(true)
		}
		fn.Call(ctx, mod, stack)
	})
}

// firstGuestFD is the pre-opened root; descriptors above it are files the guest opened.
const firstGuestFD = 3

// readWrap records where a read of stdin keeps its iovec array: it lies on the guest's C stack,
// so it tells the driver's park (always the same call stack) from a read elsewhere that merely
// looks like it.
func readWrap(fn api.GoModuleFunction) api.GoModuleFunction {
	return api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
		if inst := instanceOf(ctx); inst != nil && uint32(stack[0]) == 0 {
			inst.readIovs = uint32(stack[1])
		}
		fn.Call(ctx, mod, stack)
	})
}

type instanceKey struct{}

// instanceOf returns the instance whose guest made a host call: the context of its _start call
// carries it.
func instanceOf(ctx context.Context) *Instance {
	inst, _ := ctx.Value(instanceKey{}).(*Instance)
	return inst
}

// pollOneoff implements WASI poll_oneoff for what CPython uses: clock subscriptions, relative or
// absolute, on the realtime or monotonic clock (time.sleep, select timeouts), and fd
// subscriptions. Regular files, directories and the output streams are always ready; stdin is
// ready only while a hand-over is being read. Every wait ends early when the run's deadline
// passes (the guest is interrupted: EINTR) or the instance is closed (the guest is stopped).
func pollOneoff(ctx context.Context, mod api.Module, stack []uint64) {
	in, out, nsub, resultNevents := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	stack[0] = uint64(pollOneoffErrno(ctx, mod, in, out, nsub, resultNevents))
}

func pollOneoffErrno(ctx context.Context, mod api.Module, in, out, nsub, resultNevents uint32) uint32 {
	inst := instanceOf(ctx)
	if nsub == 0 || inst == nil {
		return errnoInval
	}
	mem := mod.Memory()
	subs, ok := mem.Read(in, nsub*48)
	if !ok {
		return 21 // EFAULT
	}
	// Copy: the guest's memory is only touched again when writing the events.
	subs = append([]byte(nil), subs...)

	type sub struct {
		userdata []byte
		typ      byte
		ready    bool
		errno    uint16
		wait     time.Duration // clocks
	}
	all := make([]sub, nsub)
	le := binary.LittleEndian
	minWait := time.Duration(-1)
	nready := 0
	for i := range all {
		s := subs[i*48 : (i+1)*48]
		all[i].userdata, all[i].typ = s[0:8], s[8]
		switch s[8] {
		case eventClock:
			id := le.Uint32(s[16:])
			timeout := int64(le.Uint64(s[24:]))
			flags := le.Uint16(s[40:])
			var d time.Duration
			switch {
			case flags&1 != 0: // subscription_clock_abstime
				if id != clockRealtime && id != clockMonotonic {
					all[i].ready, all[i].errno = true, errnoNotsup
					nready++
					continue
				}
				d = time.Duration(timeout - inst.clock.now(id))
			default:
				d = time.Duration(timeout)
			}
			all[i].wait = max(d, 0)
			if minWait < 0 || all[i].wait < minWait {
				minWait = all[i].wait
			}
		case eventFdRead, eventFdWrite:
			fd := le.Uint32(s[16:])
			if fd == 0 && s[8] == eventFdRead && !inst.stdin.hasPending() {
				continue // stdin: waits for a hand-over, which never comes during a run
			}
			all[i].ready = true
			nready++
		default:
			return errnoInval
		}
	}
	if nready == 0 {
		waited, interrupted := inst.wait(minWait)
		inst.clock.slept(waited)
		for i := range all {
			if all[i].typ == eventClock && (interrupted || all[i].wait <= waited) {
				all[i].ready = true
				nready++
			}
		}
		if interrupted && nready == 0 {
			// The deadline passed in a wait with no timeout: EINTR makes CPython check its
			// signals at once. A wait with a timeout ends as if it had run out instead
			// (wasi-libc turns any error of a sleep into ENOTSUP); the call's check of the
			// eval breaker then raises the KeyboardInterrupt the wait tripped.
			return errnoIntr
		}
	}
	evs, ok := mem.Read(out, nsub*32)
	if !ok {
		return 21 // EFAULT
	}
	n := uint32(0)
	for i := range all {
		if !all[i].ready {
			continue
		}
		e := evs[n*32 : (n+1)*32]
		clear(e)
		copy(e, all[i].userdata)
		le.PutUint16(e[8:], all[i].errno)
		e[10] = all[i].typ
		n++
	}
	if !mem.WriteUint32Le(resultNevents, n) {
		return 21 // EFAULT
	}
	return errnoSuccess
}
