package envd

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// envd's plain HTTP /files: GET reads a file (?path=, ?username=), POST writes files
// (multipart/form-data with "file" parts, each named by ?path= or by its file name; or a raw
// application/octet-stream body to ?path=, gzip allowed) and answers their EntryInfo list. Both
// go through the Manager's session files, so the file cap and the session's directories apply.
// The signature parameters of signed URLs are the front door's to check (authentication).

// writeHTTPError answers as envd's HTTP API does: {"code": status, "message": ...}.
func writeHTTPError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{status, fmt.Sprintf(format, args...)})
}

// httpErrorOf answers err with the status envd would give it.
func httpErrorOf(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var re *rpcError
	if errors.As(err, &re) {
		status = httpStatus(re.Code)
	} else {
		switch sandbox.KindOf(err) {
		case sandbox.KindInvalidRequest, sandbox.KindOutputLimit:
			status = http.StatusBadRequest
		case sandbox.KindNotFound:
			status = http.StatusNotFound
		case sandbox.KindForbidden, sandbox.KindPolicyViolation:
			status = http.StatusForbidden
		case sandbox.KindConflict:
			status = http.StatusConflict
		case sandbox.KindRuntimeUnavailable:
			status = http.StatusBadGateway
		case sandbox.KindNotImplemented:
			status = http.StatusNotImplemented
		}
	}
	msg := toRPC(err).Message
	writeHTTPError(w, status, "%s", msg)
}

type uploaded struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func (h *Handler) serveFiles(w http.ResponseWriter, r *http.Request, t Target) {
	q := r.URL.Query()
	if err := checkUser(q.Get("username")); err != nil {
		httpErrorOf(w, err)
		return
	}
	switch r.Method {
	case http.MethodGet:
		p := q.Get("path")
		if p == "" {
			writeHTTPError(w, http.StatusBadRequest, "the path query parameter is required")
			return
		}
		b, err := t.Engine.ReadFile(r.Context(), t.Session, resolve(p))
		if err != nil {
			httpErrorOf(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": path.Base(resolve(p))}))
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	case http.MethodPost:
		out, err := h.upload(r, t)
		if err != nil {
			httpErrorOf(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	default:
		writeHTTPError(w, http.StatusMethodNotAllowed, "%s /files: envd's /files takes GET (read) and POST (write)", r.Method)
	}
}

// upload writes the files of a POST /files.
func (h *Handler) upload(r *http.Request, t Target) ([]uploaded, error) {
	body := http.MaxBytesReader(nil, r.Body, h.opts.MaxUpload)
	qpath := r.URL.Query().Get("path")
	write := func(p string, content []byte) (uploaded, error) {
		p = resolve(p)
		if err := t.Engine.WriteFile(r.Context(), t.Session, p, content); err != nil {
			return uploaded{}, err
		}
		return uploaded{Path: p, Name: path.Base(p), Type: "file"}, nil
	}
	// A file is read up to the most a session file may have, so one too large is refused
	// before it is all in memory.
	maxFile := t.Engine.Policy().MaxFileBytes
	read := func(r io.Reader) ([]byte, error) {
		if maxFile > 0 {
			r = io.LimitReader(r, maxFile+1)
		}
		b, err := io.ReadAll(r)
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, errorf(codeInvalidArgument, "the upload is over %d bytes, the most a POST /files may carry", h.opts.MaxUpload)
		case err != nil:
			return nil, errorf(codeInvalidArgument, "reading the upload: %v", err)
		case maxFile > 0 && int64(len(b)) > maxFile:
			return nil, errorf(codeInvalidArgument, "a file of the upload is over the %d bytes a file may have (limits.max_file_bytes in the daemon's configuration)", maxFile)
		}
		return b, nil
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		if qpath == "" {
			return nil, errorf(codeInvalidArgument, "the path query parameter is required for a raw body upload")
		}
		var src io.Reader = body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(body)
			if err != nil {
				return nil, errorf(codeInvalidArgument, "the body is not gzip: %v", err)
			}
			src = zr
		}
		b, err := read(src)
		if err != nil {
			return nil, err
		}
		u, err := write(qpath, b)
		if err != nil {
			return nil, err
		}
		return []uploaded{u}, nil
	}
	if params["boundary"] == "" {
		return nil, errorf(codeInvalidArgument, "the multipart body has no boundary")
	}
	mr := multipart.NewReader(body, params["boundary"])
	var out []uploaded
	seen := map[string]bool{}
	for {
		part, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, errorf(codeInvalidArgument, "reading the multipart body: %v", err)
		}
		if part.FormName() != "file" {
			continue
		}
		p := qpath
		if p == "" {
			// The part's file name with its directories (Part.FileName keeps only the base).
			_, dp, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			p = dp["filename"]
		}
		if p == "" {
			return out, errorf(codeInvalidArgument, "a file part has no path: give ?path= or the part's file name")
		}
		if seen[resolve(p)] {
			return out, errorf(codeInvalidArgument, "you cannot upload multiple files to the same path '%s' in one upload request", resolve(p))
		}
		seen[resolve(p)] = true
		b, err := read(part)
		if err != nil {
			return out, err
		}
		u, err := write(p, b)
		if err != nil {
			return out, err
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, errorf(codeInvalidArgument, "the multipart body has no \"file\" part")
	}
	return out, nil
}
