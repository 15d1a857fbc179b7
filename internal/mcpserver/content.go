package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox-dev/agentbox/api"
)

// What a model reads of a result. The structured content has everything (api.Result); the
// content blocks say it for a model: the streams, the exception and the routing as text, figures
// as images, rich values as text and HTML.

// Bounds on what a run's content carries inline. Past them the structured content still lists
// every artifact, and the text says what was left out.
const (
	maxImages     = 8
	maxImageBytes = 8 << 20
)

// runContent is a run's result as content blocks. Figures (image artifacts) are fetched through
// b, as GET /v1/artifacts/{id} serves them.
func runContent(ctx context.Context, b Backend, r *api.Result) []mcp.Content {
	out := []mcp.Content{&mcp.TextContent{Text: runText(r)}}
	for i, o := range r.Outputs {
		if o.Text != "" {
			out = append(out, &mcp.TextContent{Text: o.Text})
		}
		if o.HTML != "" {
			out = append(out, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: fmt.Sprintf("agentbox://output/%d.html", i+1), MIMEType: "text/html", Text: o.HTML,
			}})
		}
	}
	var notes []string
	images := 0
	for _, a := range r.Artifacts {
		if !strings.HasPrefix(a.MIME, "image/") {
			continue
		}
		if images == maxImages || a.Size > maxImageBytes {
			notes = append(notes, fmt.Sprintf("%s (%s, %d bytes) is not shown inline; its id is %s", a.Name, a.MIME, a.Size, a.ID))
			continue
		}
		data, mime, err := b.Artifact(ctx, a.ID)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s could not be fetched: %v", a.Name, err))
			continue
		}
		if mime == "" {
			mime = a.MIME
		}
		out = append(out, &mcp.ImageContent{Data: data, MIMEType: mime})
		images++
	}
	if len(notes) > 0 {
		out = append(out, &mcp.TextContent{Text: strings.Join(notes, "\n")})
	}
	return out
}

// runText says what a run did, for a model: the streams, the exception, the exit code, the tier
// and why, and what it left behind.
func runText(r *api.Result) string {
	var b strings.Builder
	section := func(name, body string, truncated bool) {
		if body == "" && !truncated {
			return
		}
		fmt.Fprintf(&b, "%s:\n%s", name, body)
		if !strings.HasSuffix(body, "\n") {
			b.WriteString("\n")
		}
		if truncated {
			fmt.Fprintf(&b, "(%s went over its limit; the rest was dropped)\n", name)
		}
	}
	section("stdout", r.Stdout, r.StdoutTruncated)
	section("stderr", r.Stderr, r.StderrTruncated)
	if e := r.Error; e != nil {
		fmt.Fprintf(&b, "error: %s: %s\n", e.Name, e.Value)
		if e.Traceback != "" && !strings.Contains(r.Stderr, e.Traceback) {
			section("traceback", e.Traceback, false)
		}
	}
	fmt.Fprintf(&b, "exit code %d, runtime %s, %.1f ms", r.ExitCode, r.Runtime, r.Timings.TotalMS)
	if len(r.Routing.Reasons) > 0 {
		fmt.Fprintf(&b, "\nrouting: %s", strings.Join(r.Routing.Reasons, "; "))
	}
	for _, f := range r.Files {
		fmt.Fprintf(&b, "\nfile changed: %s (%d bytes)", f.Path, f.Size)
	}
	for _, a := range r.Artifacts {
		fmt.Fprintf(&b, "\nartifact: %s (%s, %d bytes, id %s)", a.Name, a.MIME, a.Size, a.ID)
	}
	return b.String()
}

// fileContent is a file's bytes for a model: text as text, an image as an image, other bytes as
// a note (the structured content holds them, base64).
func fileContent(path string, b []byte) []mcp.Content {
	if mime := http.DetectContentType(b); strings.HasPrefix(mime, "image/") && len(b) <= maxImageBytes {
		return []mcp.Content{&mcp.ImageContent{Data: b, MIMEType: mime}}
	}
	if utf8.Valid(b) && !strings.ContainsRune(string(b), 0) {
		return []mcp.Content{&mcp.TextContent{Text: string(b)}}
	}
	return []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s: %d bytes that are not text; the structured content's content field has them in base64", path, len(b))}}
}
