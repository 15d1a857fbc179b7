package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A session's files are addressed by the query parameter path: absolute inside the sandbox, or
// relative to /home/user. The content routes move raw bytes, so a client can stream a file
// without base64.

// GET /v1/sessions/{id}/files?path=DIR
func (s *API) handleListFiles(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	list, err := s.engine(r).ListFiles(r.Context(), id, r.URL.Query().Get("path"))
	if err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	writeJSON(w, http.StatusOK, apiwire.FilesToAPI(list))
}

// GET /v1/sessions/{id}/files/content?path=FILE
func (s *API) handleReadFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	path, err := pathParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := s.engine(r).ReadFile(r.Context(), id, path)
	if err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	writeBytes(w, b)
}

// PUT /v1/sessions/{id}/files/content?path=FILE with the file's bytes as the body.
func (s *API) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	path, err := pathParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, ok := s.readRaw(w, r)
	if !ok {
		return
	}
	if err := s.engine(r).WriteFile(r.Context(), id, path, b); err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// DELETE /v1/sessions/{id}/files?path=PATH
func (s *API) handleRemoveFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	path, err := pathParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.engine(r).RemoveFile(r.Context(), id, path); err != nil {
		s.fail(w, r, sessionError(id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func pathParam(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", invalid("the query parameter path is missing").
			WithHint("add ?path=FILE (absolute, or relative to %s)", sandbox.WorkDir)
	}
	return p, nil
}

// GET /v1/artifacts/{id}
func (s *API) handleGetArtifact(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a, rc, err := s.engine(r).Artifact(id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", a.MIME)
	w.Header().Set("ETag", strconv.Quote(a.SHA256))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", a.Name))
	w.Header().Set("Cache-Control", "private, max-age=86400, immutable")
	http.ServeContent(w, r, "", time.Time{}, rc)
}

// GET /v1/images
func (s *API) handleListImages(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, apiwire.ImagesToAPI(s.engine(r).Images()))
}
