#!/usr/bin/env bash
# Prints the go flags that build runsc from the pinned gVisor module with our patch:
#
#   go build $(scripts/gvisor-patch.sh) ./cmd/agentbox-runsc   (or gvisor.dev/gvisor/runsc)
#
# The patch (scripts/gvisor-patch/gvisor-<version>.patch, ours) changes the sentry's fork
# (pkg/sentry/mm): the parent's written memory is write-protected in the stub instead of
# unmapped (so its reads do not fault again), and copy-behind: a child that parks in
# rt_sigtimedwait (a wait of a second or more) copies, 30 ms after the fork, the private memory
# its parent wrote since the fork before (capped at 64 MiB), so the parent's next writes take
# the originals without copying. A heavy session's per-step snapshot is a fork of its Python
# process that parks, and those copies were what the step after it paid (docs/RATIONALE.md,
# "Heavy snapshot latency, fifth pass"). Then the child gives the parent what it changed as its own
# (pre-take: writable and mapped populated in the think time, so the next run writes there with no
# fault), keeping a reference on its copies there so that the next child references the pages the
# parent did not change instead of copying them (RATIONALE, "eighth pass").
# It also shares a template's pages between the sandboxes restored from it (pkg/sentry/mm/
# template.go, asked for by the spec annotation dev.agentbox.share-template-pages): a restore keeps
# its private anonymous memory in the checkpoint's pages file, mapped shared and read-only, with
# its pmas copy-on-write (a write copies 64 KiB into the sandbox's memory file), and does not
# read those pages into its memory file at all; a save copies
# those pages in first and, if the sandbox goes on running, shares them again after it
# (docs/RATIONALE.md, "Sharing the template's pages between restored sandboxes"). A quiet fork
# (the idle release's: SIGUSR1 and SIGUSR2 blocked) gives the child no copy-behind work and
# first points the parent's copies of template pages that still hold the template's bytes back
# at the template, in anonymous and private file mappings alike (mm/copy_behind.go, template.go;
# RATIONALE, "An idle release gives the copies that still equal the template back to it").
# And pgalloc's MemoryFile.IsSavable reads an atomic instead of taking the MemoryFile's lock,
# which the memory file's save holds through its zero scan while the kernel's save, in parallel,
# asks it for every pma (docs/RATIONALE.md, "Durable checkpoints: what a run arriving during one
# waits for").
# A `runsc checkpoint --leave-running --cancel-fd N` can be cancelled (a byte written to the pipe
# whose read end is N, or its write end closed): the sentry polls the pipe in its save's long loops
# (pkg/state's encoder, the template pages' copy, the memory file's scan and page writes, between
# the kernel save's steps), stops there and resumes the sandbox exactly as before, without recording
# a save error; the command fails with "save cancelled". A cancellable save keeps 8 page writes in
# flight instead of 128, which a cancel waits for (docs/RATIONALE.md, "A durable checkpoint yields
# to a run").
# A save that lets the sandbox go on running (`runsc checkpoint --leave-running`, agentbox's durable
# checkpoint of a session's latest step) gets back the file translations it drops first (the shared
# libraries' text: InvalidateUnsavable), mapped again before the sandbox resumes, instead of the next
# run faulting each page of them back in (pkg/sentry/mm/retranslate.go; docs/RATIONALE.md, "ninth
# pass").
# It is applied to a copy of the pinned module by scripts/patched-module.sh (cached, idempotent);
# `agentbox setup` (internal/setup/heavy.go) runs this script in the source tree.
# The last line of the output is the flags; with -key it prints the patch's short hash instead
# (what the built runsc's version carries, so setup rebuilds runsc when the patch changes).
set -euo pipefail
cd "$(dirname "$0")/.."
mod=gvisor.dev/gvisor
if [ "${1:-}" = -key ]; then
	sha256sum "scripts/gvisor-patch/gvisor-$(go list -m -f '{{.Version}}' "$mod").patch" | cut -c1-12
	exit 0
fi
flags=$(scripts/patched-module.sh gvisor-patch "$mod" gvisor)
echo "$flags"
