package cli

import (
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// secondsFlag reads a timeout as seconds ("30", "2.5") or a Go duration ("1m30s").
type secondsFlag float64

func (f *secondsFlag) String() string {
	if *f == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(*f), 'g', -1, 64)
}

func (f *secondsFlag) Set(s string) error {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 {
			return fmt.Errorf("must not be negative")
		}
		*f = secondsFlag(v)
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("want seconds (30, 2.5) or a duration (1m30s)")
	}
	*f = secondsFlag(d.Seconds())
	return nil
}

// mebibytesFlag reads memory as MiB ("512") or with a unit ("512M", "512MiB", "2G", "2GiB").
type mebibytesFlag int64

func (f *mebibytesFlag) String() string {
	if *f == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*f), 10)
}

func (f *mebibytesFlag) Set(s string) error {
	num, scale := strings.ToUpper(strings.TrimSpace(s)), int64(1)
	for _, u := range []struct {
		suffix string
		scale  int64
	}{{"GIB", 1024}, {"GB", 1024}, {"G", 1024}, {"MIB", 1}, {"MB", 1}, {"M", 1}} {
		if strings.HasSuffix(num, u.suffix) {
			num, scale = strings.TrimSuffix(num, u.suffix), u.scale
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("want MiB (512) or a size with a unit (512M, 2G)")
	}
	*f = mebibytesFlag(v * scale)
	return nil
}

// fileSpec is one --file LOCAL[:REMOTE].
type fileSpec struct{ local, remote string }

type fileFlag []fileSpec

func (f *fileFlag) String() string { return "" }

func (f *fileFlag) Set(s string) error {
	local, remote, _ := strings.Cut(s, ":")
	if local == "" {
		return fmt.Errorf("want LOCAL[:REMOTE], e.g. data.csv or data.csv:/home/user/in/data.csv")
	}
	if remote == "" {
		remote = path.Base(filepath.ToSlash(local))
	}
	*f = append(*f, fileSpec{local: local, remote: remote})
	return nil
}

// listFlag collects names given repeatedly or comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			*l = append(*l, n)
		}
	}
	return nil
}
