// Package dirtypages tells which pages of an anonymous mapping were written since the last time
// it was asked, from the kernel, without a fault handler: a userfaultfd in asynchronous
// write-protect mode (UFFD_FEATURE_WP_ASYNC, Linux 6.7) marks every registered page
// write-protected, the first write to a page is resolved by the kernel itself (no user-space
// handler, no signal) and leaves the page "written", and the PAGEMAP_SCAN ioctl of
// /proc/self/pagemap lists the written pages and write-protects them again in the same call.
//
// This kernel interface exists because soft-dirty bits are not always built in (no
// CONFIG_MEM_SOFT_DIRTY here), and comparing a whole guest memory with a copy of it costs
// milliseconds per step where the pages a step writes are a few hundred.
//
// One Tracker serves a process: Open makes the userfaultfd (user-mode faults only, so it needs
// no privilege whatever vm.unprivileged_userfaultfd says) and takes the pagemap file; after that
// only ioctl is needed, which a seccomp filter can allow for the four requests Tracker makes
// (Requests). On kernels or configurations without the interface Open fails, and callers fall
// back to comparing memory.
//
// For pages a program writes between every two scans, looking at them each time is cheaper
// than the fault: Peek lists the written pages without write-protecting them, and Clean then
// write-protects only the runs the caller wants tracked again, so the others stay writable and
// are reported by every scan. (Untrack, which takes pages out of tracking, does the same at the
// price of splitting the mapping at every run, which every later scan pays for.)
package dirtypages
