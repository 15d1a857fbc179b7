package rootfs

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// DefaultMirror is used when the machine names no Debian mirror for the suite.
const DefaultMirror = "http://deb.debian.org/debian"

// Mirror returns the Debian mirror the machine's apt is configured with for suite: the first
// "deb" source (deb822 .sources files or one-line .list files) that carries the suite and the
// main component. Sources for security updates or other suites do not count.
func Mirror(suite string) string {
	return mirrorFrom("/etc/apt", suite)
}

func mirrorFrom(aptDir, suite string) string {
	files := []string{filepath.Join(aptDir, "sources.list")}
	more, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*"))
	files = append(files, more...)
	for _, f := range files {
		var uri string
		switch {
		case strings.HasSuffix(f, ".sources"):
			uri = fromDeb822(f, suite)
		case strings.HasSuffix(f, ".list"):
			uri = fromOneLine(f, suite)
		}
		if uri != "" {
			return strings.TrimSuffix(uri, "/")
		}
	}
	return DefaultMirror
}

func fromDeb822(path, suite string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, stanza := range strings.Split(string(b), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(k, " ") {
				fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
			}
		}
		if !hasWord(fields["types"], "deb") || !hasWord(fields["suites"], suite) || !hasWord(fields["components"], "main") {
			continue
		}
		if strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		if uris := strings.Fields(fields["uris"]); len(uris) > 0 && strings.HasPrefix(uris[0], "http") {
			return uris[0]
		}
	}
	return ""
}

func fromOneLine(path, suite string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 || fs[0] != "deb" {
			continue
		}
		i := 1
		if strings.HasPrefix(fs[i], "[") { // options: [arch=amd64 signed-by=...]
			for i < len(fs) && !strings.HasSuffix(fs[i], "]") {
				i++
			}
			i++
		}
		if i+2 < len(fs)+1 && i+1 < len(fs) && fs[i+1] == suite && strings.HasPrefix(fs[i], "http") && hasWord(strings.Join(fs[i+2:], " "), "main") {
			return fs[i]
		}
	}
	return ""
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}
