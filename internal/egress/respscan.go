package egress

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/promptscan"
)

// Responses are scanned for instructions addressed to the model (package promptscan) before they
// reach the sandbox: text types only, the first responses.max_bytes of the body, after undoing
// gzip or deflate. The gateway holds a text response until it has read that much or the body
// ended, then sends on what it read followed by the rest; so a text response costs its first
// MiB of buffering (memory, and the time to receive it, before the sandbox sees the first byte).
// Streams (text/event-stream, NDJSON) are not held, hence not scanned; nor are bodies in an
// encoding the gateway does not decode (br, zstd).

// WarningHeader is the header an annotated response carries: what was found, in the gateway's
// words (kinds and rule names, never the response's text).
const WarningHeader = "X-Agentbox-Warning"

// streaming are the text types that arrive as a stream an agent reads as it comes.
func streaming(mt string) bool {
	switch mt {
	case "text/event-stream", "application/x-ndjson", "application/jsonl", "application/stream+json", "application/json-seq":
		return true
	}
	return false
}

// checkResponse scans resp and applies the profile's responses.action; it returns the response to
// send on (resp itself, annotated or not, or the gateway's refusal) and notes the outcome in ev.
func (g *Gateway) checkResponse(req *http.Request, resp *http.Response, p *Profile, ev *Event) *http.Response {
	res, ok := scanResponse(req, resp, int64(p.Responses.MaxBytes))
	if !ok || !res.Flagged() {
		return resp
	}
	for _, r := range res.Rules() {
		ev.Detectors = append(ev.Detectors, "response:"+r)
	}
	summary := "the response holds text addressed to the model: " + res.Summary()
	switch {
	case p.Responses.Action == "block" && p.Mode == ModeEnforce:
		resp.Body.Close()
		ev.Decision, ev.Status = "blocked", http.StatusForbidden
		ev.Reason = strings.TrimPrefix(ev.Reason+"; blocked: "+summary, "; ")
		return refuse(req, http.StatusForbidden, "agentbox egress: blocked: "+summary+" (the origin answered "+resp.Status+"; profile "+p.Name+" withholds such responses)")
	case p.Responses.Action == "annotate" && p.Mode == ModeEnforce:
		resp.Header.Add(WarningHeader, "prompt-injection: "+res.Summary())
		ev.Reason = strings.TrimPrefix(ev.Reason+"; flagged: "+summary, "; ")
	case p.Responses.Action == "block" || p.Responses.Action == "annotate":
		// Warn mode: recorded, nothing changed.
		ev.Reason = strings.TrimPrefix(ev.Reason+"; flagged: "+summary, "; ")
	default: // log
		ev.Reason = strings.TrimPrefix(ev.Reason+"; logged: "+summary, "; ")
	}
	return resp
}

// scanResponse reads up to max bytes of a text response, puts them back in front of the rest of
// the body, and scans them. ok is false when the response is not scanned.
func scanResponse(req *http.Request, resp *http.Response, max int64) (promptscan.Result, bool) {
	if req.Method == http.MethodHead || resp.StatusCode < 200 || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified || resp.Body == nil || resp.Body == http.NoBody {
		return promptscan.Result{}, false
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	if !promptscan.IsText(ct) || streaming(mt) {
		return promptscan.Result{}, false
	}
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	switch enc {
	case "", "identity", "gzip", "x-gzip", "deflate":
	default:
		return promptscan.Result{}, false
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, max))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), resp.Body), resp.Body}
	if err != nil {
		return promptscan.Result{}, false // the client meets the error reading the rest
	}
	text := buf
	switch enc {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(bytes.NewReader(buf))
		if err != nil {
			return promptscan.Result{}, false
		}
		text, _ = io.ReadAll(io.LimitReader(zr, max)) // a body cut at max decodes in part
	case "deflate":
		// HTTP's deflate is zlib; some servers send raw deflate.
		if zr, err := newZlibOrFlate(buf); err == nil {
			text, _ = io.ReadAll(io.LimitReader(zr, max))
		} else {
			return promptscan.Result{}, false
		}
	}
	return promptscan.Scan(ct, text), true
}

func newZlibOrFlate(b []byte) (io.Reader, error) {
	if len(b) >= 2 && b[0]&0x0f == 8 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0 {
		return flate.NewReader(bytes.NewReader(b[2:])), nil
	}
	return flate.NewReader(bytes.NewReader(b)), nil
}
