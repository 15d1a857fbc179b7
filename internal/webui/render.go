package webui

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// assets are the console's templates, style sheet and script, built into the binary.
//
//go:embed assets
var assets embed.FS

// pages are the parsed templates: each page's file with the shared layout.
type pages struct {
	byName map[string]*template.Template
}

func loadPages() (*pages, error) {
	layout, err := fs.ReadFile(assets, "assets/templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	files, err := fs.Glob(assets, "assets/templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "assets/templates/"), ".html")
		if name == "layout" {
			continue
		}
		body, err := fs.ReadFile(assets, f)
		if err != nil {
			return nil, fmt.Errorf("webui: %w", err)
		}
		t := template.New("layout").Funcs(funcs)
		if _, err := t.Parse(string(layout)); err != nil {
			return nil, fmt.Errorf("webui: layout: %w", err)
		}
		if _, err := t.Parse(string(body)); err != nil {
			return nil, fmt.Errorf("webui: %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// frame is what every page's layout reads: who is logged in, their token for the forms, and the
// page's own data.
type frame struct {
	Who     string
	CSRF    string
	Admin   bool
	Nav     string
	Version string
	Data    any
}

// render writes page name with data, as c sees it (nil: nobody logged in).
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name string, c *call, data any) {
	t, ok := u.pages.byName[name]
	if !ok {
		u.log.Error("web console: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	f := frame{Version: u.opts.Version, Data: data, Nav: name}
	if c != nil {
		f.Who, f.CSRF, f.Admin = c.who(), c.session.csrf, c.id.Admin
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout", f); err != nil {
		u.log.Error("web console: page not rendered", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// errorPage answers with a page that says what went wrong.
func (u *UI) errorPage(w http.ResponseWriter, r *http.Request, c *call, status int, title, message string) {
	if message != "" {
		message = strings.ToUpper(message[:1]) + message[1:]
	}
	u.render(w, r, status, "error", c, map[string]any{"Status": status, "Title": title, "Message": message})
}

// static serves the embedded style sheet and script.
func (u *UI) static() http.Handler {
	sub, err := fs.Sub(assets, "assets/static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return http.StripPrefix("/ui/static/", http.FileServerFS(sub))
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago":      ago,
	"duration": duration,
	"clock":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"short":    short,
	"bytes":    humanBytes,
	"ms":       func(f float64) string { return fmt.Sprintf("%.1f ms", f) },
	"add":      func(a, b int) int { return a + b },
	"join":     strings.Join,
	"list":     func(s ...string) []string { return s },
	"itoa":     itoa,
	"snap":     snapLabel,
}

func itoa(n int) string { return strconv.Itoa(n) }

// snapLabel words a step's snapshot state for a badge.
func snapLabel(s sandbox.SnapshotState) string {
	switch s {
	case sandbox.SnapshotNone, "":
		return "no snapshot"
	case sandbox.SnapshotKept:
		return "in memory"
	}
	return string(s)
}

// ago says how long before now t was, in the largest unit that fits.
func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return duration(time.Since(t)) + " ago"
}

// duration writes d briefly: 42 s, 3 min, 2 h 5 min, 3 d.
func duration(d time.Duration) string {
	switch {
	case d < 0:
		return "0 s"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%d d", int(d.Hours()/24))
}

// short cuts a long id or hash for a table cell; the whole value is in the cell's title.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
