package bench

import (
	"fmt"
	"io"
)

// benchmark is one run of a benchmark in progress, whatever the target: its settings, where its
// progress goes, and the report it fills. Each target's bencher embeds one and adds what its
// scenarios need.
type benchmark[M, S any, C computeSection] struct {
	opts S
	log  io.Writer
	res  *Report[M, S, C]
}

// progress writes a line to the progress log (stderr): what runs now, and each row's figures.
func (b *benchmark[M, S, C]) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

// note adds a note to the report.
func (b *benchmark[M, S, C]) note(format string, args ...any) {
	b.res.addNote(format, args...)
}

// addFailed adds row to the report as failed with err.
func (b *benchmark[M, S, C]) addFailed(row Row, err error) {
	row.Error = err.Error()
	b.progress("%s: FAILED: %v", row.Name, err)
	b.res.Rows = append(b.res.Rows, row)
}
