// Package logtail keeps the last lines a child process (a nano worker, a gVisor sandbox) wrote to
// its log, so an error about the child can say what the child said last.
package logtail

import (
	"bufio"
	"io"
	"strings"
	"sync"
)

// Keep is how many lines a Tail remembers.
const Keep = 5

// Tail remembers the last Keep lines of a log. The zero value is ready to use.
type Tail struct {
	mu    sync.Mutex
	lines []string
}

// Follow reads r line by line until it ends, passing each line to each (for the daemon's own
// log) and remembering the last ones. Lines longer than 64 KiB are split.
func (t *Tail) Follow(r io.Reader, each func(line string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		each(line)
		t.mu.Lock()
		if t.lines = append(t.lines, line); len(t.lines) > Keep {
			t.lines = t.lines[1:]
		}
		t.mu.Unlock()
	}
}

// String returns the remembered lines joined by "; ", or "no log" when there are none.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return "no log"
	}
	return strings.Join(t.lines, "; ")
}
