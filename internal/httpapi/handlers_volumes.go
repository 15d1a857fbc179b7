package httpapi

import (
	"context"
	"net/http"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/apiwire"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// volumeEngine is the optional ability of an Engine to keep volumes (sandbox.Manager and its
// View); an engine without it answers the volume routes with runtime_unavailable.
type volumeEngine interface {
	CreateVolume(ctx context.Context, name string, quota int64) (sandbox.VolumeInfo, error)
	Volumes(ctx context.Context) ([]sandbox.VolumeInfo, error)
	Volume(ctx context.Context, name string) (sandbox.VolumeInfo, error)
	DeleteVolume(ctx context.Context, name string) error
	ReadVolumeFile(ctx context.Context, name, path string) ([]byte, error)
	WriteVolumeFile(ctx context.Context, name, path string, content []byte) error
}

func (s *API) volumes(w http.ResponseWriter, r *http.Request) (volumeEngine, bool) {
	v, ok := s.engine(r).(volumeEngine)
	if !ok {
		s.fail(w, r, sandbox.Errorf(sandbox.KindRuntimeUnavailable, "this server keeps no volumes"))
	}
	return v, ok
}

// POST /v1/volumes
func (s *API) handleCreateVolume(w http.ResponseWriter, r *http.Request) {
	v, ok := s.volumes(w, r)
	if !ok {
		return
	}
	var in api.CreateVolumeRequest
	if err := decode(w, r, s.maxBody, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := v.CreateVolume(r.Context(), in.Name, in.QuotaBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiwire.VolumeToAPI(info))
}

// GET /v1/volumes
func (s *API) handleListVolumes(w http.ResponseWriter, r *http.Request) {
	v, ok := s.volumes(w, r)
	if !ok {
		return
	}
	list, err := v.Volumes(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]api.Volume, 0, len(list))
	for _, x := range list {
		out = append(out, apiwire.VolumeToAPI(x))
	}
	writeJSON(w, http.StatusOK, api.VolumeList{Volumes: out})
}

// GET /v1/volumes/{name}
func (s *API) handleGetVolume(w http.ResponseWriter, r *http.Request) {
	v, ok := s.volumes(w, r)
	if !ok {
		return
	}
	info, err := v.Volume(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiwire.VolumeToAPI(info))
}

// DELETE /v1/volumes/{name}
func (s *API) handleDeleteVolume(w http.ResponseWriter, r *http.Request) {
	v, ok := s.volumes(w, r)
	if !ok {
		return
	}
	if err := v.DeleteVolume(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// GET /v1/volumes/{name}/files/{path...}: a file's raw bytes.
func (s *API) handleReadVolumeFile(w http.ResponseWriter, r *http.Request) {
	v, ok := s.volumes(w, r)
	if !ok {
		return
	}
	b, err := v.ReadVolumeFile(r.Context(), r.PathValue("name"), r.PathValue("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeBytes(w, b)
}

// PUT /v1/volumes/{name}/files/{path...} with the file's bytes as the body.
func (s *API) handleWriteVolumeFile(w http.ResponseWriter, r *http.Request) {
	v, ok := s.volumes(w, r)
	if !ok {
		return
	}
	b, ok := s.readRaw(w, r)
	if !ok {
		return
	}
	if err := v.WriteVolumeFile(r.Context(), r.PathValue("name"), r.PathValue("path"), b); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
