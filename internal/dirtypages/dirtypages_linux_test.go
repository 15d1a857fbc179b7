package dirtypages

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/testenv"
	"golang.org/x/sys/unix"
)

// TestMain runs the tracking check as a child process when asked to (as another uid).
func TestMain(m *testing.M) {
	if os.Getenv("DIRTYPAGES_CHILD") == "1" {
		if err := check(nil); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type errT struct{ err error }

func (e *errT) Error() string { return e.err.Error() }

// check maps a reservation like the nano engine's (PROT_NONE, made readable and writable as it
// grows), writes pages from user space and from the kernel, and compares the scan with them.
func check(t *testing.T) error {
	tr, err := Open(nil)
	if err != nil {
		return err
	}
	defer tr.Close()
	const reserve, committed = 256 << 20, 16 << 20
	b, err := unix.Mmap(-1, 0, reserve, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return err
	}
	defer unix.Munmap(b)
	if err := tr.Register(b); err != nil {
		return err
	}
	if err := unix.Mprotect(b[:committed], unix.PROT_READ|unix.PROT_WRITE); err != nil {
		return err
	}
	scan := func() ([]int, error) {
		var pages []int
		err := tr.Written(b[:committed], func(off, n int) {
			for p := off; p < off+n; p += Page {
				pages = append(pages, p/Page)
			}
		})
		return pages, err
	}
	b[5*Page] = 1 // a page never touched before
	_ = b[7*Page] // read only
	b[9*Page+100] = 2
	b[10*Page] = 3
	// The kernel writes page 12 (read(2) into the buffer).
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		return err
	}
	unix.Write(p[1], []byte("hello"))
	if _, err := unix.Read(p[0], b[12*Page:12*Page+5]); err != nil {
		return &errT{err}
	}
	unix.Close(p[0])
	unix.Close(p[1])
	got, err := scan()
	if err != nil {
		return err
	}
	if want := []int{5, 9, 10, 12}; !slices.Equal(got, want) {
		return &errT{errorf("written pages %v, want %v", got, want)}
	}
	if got, err = scan(); err != nil || len(got) != 0 {
		return &errT{errorf("second scan: %v %v, want none", got, err)}
	}
	b[9*Page] = 4
	b[committed-1] = 5
	if got, err = scan(); err != nil || !slices.Equal(got, []int{9, committed/Page - 1}) {
		return &errT{errorf("third scan: %v %v", got, err)}
	}
	// Clean: writes before it are forgotten.
	b[20*Page] = 1
	if err := tr.Clean(b[:committed]); err != nil {
		return err
	}
	if got, err = scan(); err != nil || len(got) != 0 {
		return &errT{errorf("scan after Clean: %v %v", got, err)}
	}
	// Pages given back with MADV_DONTNEED read as zeros: the kernel forgets they were clean,
	// so they count as written (too many, never too few) until the next scan.
	unix.Madvise(b[:committed], unix.MADV_DONTNEED)
	b[3*Page] = 1
	if got, err = scan(); err != nil || !slices.Contains(got, 3) || !slices.Contains(got, 100) {
		return &errT{errorf("scan after DONTNEED: %d pages %v, want all", len(got), err)}
	}
	b[4*Page] = 1
	if got, err = scan(); err != nil || !slices.Equal(got, []int{4}) {
		return &errT{errorf("scan after the scan after DONTNEED: %v %v", got, err)}
	}
	// Untrack: pages out of tracking are not reported (the scan goes past them), the others
	// are; Register tracks them again, clean.
	if err := tr.Untrack(b[30*Page : 33*Page]); err != nil {
		return err
	}
	if err := tr.Untrack(b[40*Page : 41*Page]); err != nil {
		return err
	}
	b[29*Page], b[31*Page], b[40*Page], b[41*Page] = 1, 1, 1, 1
	if got, err = scan(); err != nil || !slices.Equal(got, []int{29, 41}) {
		return &errT{errorf("scan with pages out of tracking: %v %v, want [29 41]", got, err)}
	}
	b[32*Page] = 2
	if got, err = scan(); err != nil || len(got) != 0 {
		return &errT{errorf("second scan with pages out of tracking: %v %v, want none", got, err)}
	}
	if err := tr.Register(b[30*Page : 41*Page]); err != nil {
		return err
	}
	if got, err = scan(); err != nil || len(got) != 0 {
		return &errT{errorf("scan after tracking again: %v %v, want none", got, err)}
	}
	b[31*Page], b[40*Page] = 3, 3
	if got, err = scan(); err != nil || !slices.Equal(got, []int{31, 40}) {
		return &errT{errorf("scan of pages tracked again: %v %v, want [31 40]", got, err)}
	}
	// Peek: written pages are reported and stay written (reported again, by Peek and by the
	// next scan) until Clean; cleaning some runs leaves the others written.
	peek := func() ([]int, error) {
		var pages []int
		err := tr.Peek(b[:committed], func(off, n int) {
			for p := off; p < off+n; p += Page {
				pages = append(pages, p/Page)
			}
		})
		return pages, err
	}
	b[50*Page], b[51*Page], b[60*Page] = 4, 4, 4
	for range 2 {
		if got, err = peek(); err != nil || !slices.Equal(got, []int{50, 51, 60}) {
			return &errT{errorf("peek: %v %v, want [50 51 60]", got, err)}
		}
	}
	if err := tr.Clean(b[50*Page : 52*Page]); err != nil {
		return err
	}
	b[70*Page] = 4
	if got, err = peek(); err != nil || !slices.Equal(got, []int{60, 70}) {
		return &errT{errorf("peek after cleaning 50-51: %v %v, want [60 70]", got, err)}
	}
	b[51*Page] = 5
	if got, err = scan(); err != nil || !slices.Equal(got, []int{51, 60, 70}) {
		return &errT{errorf("scan after peeks: %v %v, want [51 60 70]", got, err)}
	}
	if got, err = peek(); err != nil || len(got) != 0 {
		return &errT{errorf("peek after the scan: %v %v, want none", got, err)}
	}
	return nil
}

type strErr string

func (s strErr) Error() string { return string(s) }

func errorf(f string, a ...any) error { return strErr(sprintf(f, a...)) }

func TestWrittenPages(t *testing.T) {
	err := check(t)
	if errors.Is(err, ErrUnsupported) {
		testenv.Skip(t, "this kernel cannot track written pages (Linux 6.7+ with userfaultfd): "+err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestWrittenPagesUnprivileged: the same as an unprivileged uid (vm.unprivileged_userfaultfd
// may be 0: UFFD_USER_MODE_ONLY needs no privilege).
func TestWrittenPagesUnprivileged(t *testing.T) {
	if tr, err := Open(nil); err != nil {
		testenv.Skip(t, "this kernel cannot track written pages (Linux 6.7+ with userfaultfd): "+err.Error())
	} else {
		tr.Close()
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to change uid") // runs unprivileged already via TestWrittenPages
	}
	// The test binary's directory is root's own: copy it where uid 65534 can run it.
	dir, err := os.MkdirTemp("", "dirtypages-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := dir + "/dirtypages.test"
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "DIRTYPAGES_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as uid 65534: %v: %s", err, out)
	}
}

func BenchmarkScan(b *testing.B) {
	tr, err := Open(nil)
	if err != nil {
		b.Skip(err)
	}
	for _, size := range []int{13<<20 + 512<<10, 256 << 20} {
		m, _ := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		for k := 0; k < len(m); k += Page {
			m[k] = 1
		}
		if err := tr.Register(m); err != nil {
			b.Fatal(err)
		}
		b.Run(sprintf("%dMB", size>>20), func(b *testing.B) {
			for n := 0; n < b.N; n++ {
				b.StopTimer()
				for k := 0; k < 400; k++ {
					m[(k*37%(len(m)/Page))*Page] = byte(n)
				}
				b.StartTimer()
				cnt := 0
				tr.Written(m, func(off, n int) { cnt += n / Page })
			}
		})
		unix.Munmap(m)
	}
}

func sprintf(f string, a ...any) string { return fmt.Sprintf(f, a...) }
