package nano

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/engine"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// oobCode makes CPython read far outside the guest's linear memory from pure Python: a code
// object whose LOAD_CONST index (0x30000000, through EXTENDED_ARG) points 3 GiB past its
// constants (CPython 3.11 does not check bytecode). Native CPython segfaults on it.
const oobCode = `import dis
def f():
    return 1
op = dis.opmap
f.__code__ = f.__code__.replace(co_code=bytes([op['RESUME'], 0, op['EXTENDED_ARG'], 0x30,
    op['EXTENDED_ARG'], 0, op['EXTENDED_ARG'], 0, op['LOAD_CONST'], 0, op['RETURN_VALUE'], 0]))
print('before', flush=True)
f()
print('after')
`

// A guest that accesses memory out of bounds fails its run with a typed error, its session comes
// back at the step before, and nothing else is touched: another session keeps its state and the
// next one-shot run works. In the build with guard pages (scripts/wazero-guard.sh) the access
// faults and ends the worker process, which the daemon recognises (engine.FaultWatch); in a
// plain build wazero's bounds check traps it.
func TestGuestOutOfBoundsAccess(t *testing.T) {
	e := newTTEnv(t, t.TempDir())
	ctx := context.Background()
	other := e.session()
	e.run(other, "y = 'other'")
	id := e.session()
	e.run(id, stepCode(1))
	e.run(id, stepCode(2))
	e.durable(id)

	res, err := e.m.RunInSession(ctx, id, &sandbox.RunRequest{Code: "n = 99\n" + oobCode,
		Limits: sandbox.Limits{Timeout: 20 * time.Second}})
	if err == nil && res != nil && res.Error == nil {
		t.Fatalf("an out-of-bounds access ran to its end: %+v", res)
	}
	if res != nil && strings.Contains(res.Stdout, "after") {
		t.Fatalf("the code went on after its out-of-bounds access: %q", res.Stdout)
	}
	if engine.GuardPages {
		want := engine.GuestFaultError()
		if e := sandbox.AsError(err); e == nil || e.Kind != want.Kind || !strings.Contains(e.Message, "out-of-bounds") || e.Hint == "" {
			t.Fatalf("an out-of-bounds access under guard pages: %v, want %s saying so, with a hint", err, want.Kind)
		}
		if !strings.Contains(err.Error(), "back at its state before this run") {
			t.Fatalf("the error does not say the session is back: %v", err)
		}
	}
	t.Logf("the out-of-bounds run: err %v, result %+v", err, res)
	wantState(t, e.state(id), 2)
	if out := e.run(other, "print(y)").Stdout; out != "other\n" {
		t.Fatalf("the other session after the fault: %q", out)
	}
	one, err := e.m.Run(ctx, &sandbox.RunRequest{Code: "print(6 * 7)"})
	if err != nil || one.Stdout != "42\n" {
		t.Fatalf("a one-shot run after the fault: %+v, %v", one, err)
	}
}
