package pkgindex

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// BuildWheel makes a pure-Python wheel: the module NAME with __init__.py, and the dist-info
// pip reads (METADATA, WHEEL, RECORD with each file's hash). It returns the wheel's file name and
// content.
func BuildWheel(name, version, init string, requires ...string) (string, []byte, error) {
	di := fmt.Sprintf("%s-%s.dist-info", name, version)
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version)
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := [][2]string{
		{name + "/__init__.py", init},
		{di + "/METADATA", meta},
		{di + "/WHEEL", "Wheel-Version: 1.0\nGenerator: agentbox\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			return "", nil, fmt.Errorf("wheel %s: %w", name, err)
		}
		if _, err := w.Write([]byte(f[1])); err != nil {
			return "", nil, fmt.Errorf("wheel %s: %w", name, err)
		}
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(di + "/RECORD,,\n")
	w, err := z.Create(di + "/RECORD")
	if err == nil {
		_, err = w.Write([]byte(record.String()))
	}
	if err == nil {
		err = z.Close()
	}
	if err != nil {
		return "", nil, fmt.Errorf("wheel %s: %w", name, err)
	}
	return fmt.Sprintf("%s-%s-py3-none-any.whl", name, version), buf.Bytes(), nil
}

// Index is a PEP 503 simple index of its wheels (/simple/PROJECT/ lists them with their sha256,
// /files/NAME serves one). It records the paths asked for and can be stopped, to show that a
// cached install does not ask it.
type Index struct {
	mu     sync.Mutex
	asked  []string
	down   bool
	wheels map[string][]byte // file name -> content; the project is the name before the first -
}

// Add builds a wheel (as BuildWheel) and serves it.
func (x *Index) Add(name, version, init string, requires ...string) error {
	n, data, err := BuildWheel(name, version, init, requires...)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.wheels == nil {
		x.wheels = map[string][]byte{}
	}
	x.wheels[n] = data
	return nil
}

// Asked is the paths asked for so far, in order.
func (x *Index) Asked() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]string(nil), x.asked...)
}

// SetDown stops (true) or restarts (false) answering: a stopped index answers 503.
func (x *Index) SetDown(down bool) {
	x.mu.Lock()
	x.down = down
	x.mu.Unlock()
}

func (x *Index) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.asked = append(x.asked, r.URL.Path)
	if x.down {
		http.Error(w, "index stopped", http.StatusServiceUnavailable)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/simple/"):
		project := strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/")
		var links []string
		for n, data := range x.wheels {
			if strings.ReplaceAll(strings.SplitN(n, "-", 2)[0], "_", "-") == project {
				sum := sha256.Sum256(data)
				links = append(links, fmt.Sprintf(`<a href="/files/%s#sha256=%x">%s</a>`, n, sum, n))
			}
		}
		if len(links) == 0 {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<!DOCTYPE html><html><body>%s</body></html>", strings.Join(links, "\n"))
	case strings.HasPrefix(r.URL.Path, "/files/"):
		data, ok := x.wheels[strings.TrimPrefix(r.URL.Path, "/files/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	default:
		http.NotFound(w, r)
	}
}
