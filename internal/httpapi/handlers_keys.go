package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/agentbox-dev/agentbox/api"
	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The admin API of tenant keys (/v1/keys, admin scope). It changes the key file through the same
// functions as `agentbox keys` (auth.CreateKey, RotateKey, RevokeKey: one lock, atomic writes), and
// the authenticator reads the file again when it changes, so a key made here works on its next
// request and a key revoked here is refused on its next one.

// maxKeyTTL bounds a key's lifetime (and keeps it far from time.Duration's limit).
const maxKeyTTL = 100 * 365 * 24 * time.Hour

// GET /v1/keys?tenant=
func (s *API) handleListKeys(w http.ResponseWriter, r *http.Request) {
	var tenant string
	for name, vs := range r.URL.Query() {
		switch {
		case name != "tenant":
			s.fail(w, r, invalid("unknown query parameter %q", name).WithHint("GET /v1/keys takes tenant"))
			return
		case len(vs) != 1:
			s.fail(w, r, invalid("query parameter %q is given %d times", name, len(vs)).WithHint("give it once"))
			return
		}
		tenant = vs[0]
	}
	out := api.KeyList{Keys: []api.Key{}}
	if path := s.auth.Keys().Path(); path != "" {
		recs, err := auth.ReadKeyFile(path)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, rec := range recs {
			if tenant == "" || rec.Tenant == tenant {
				out.Keys = append(out.Keys, keyToAPI(rec))
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// POST /v1/keys
func (s *API) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	var in api.CreateKeyRequest
	if err := decode(w, r, s.maxBody, &in, false); err != nil {
		s.fail(w, r, err)
		return
	}
	path, err := s.keyFile()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if math.IsNaN(in.TTL) || in.TTL < 0 || in.TTL > maxKeyTTL.Seconds() {
		s.fail(w, r, invalid("ttl %v is not a number of seconds from 0 to %.0f", in.TTL, maxKeyTTL.Seconds()).
			WithHint("give the key's lifetime in seconds (86400 is a day), or leave ttl out for a key that does not expire"))
		return
	}
	scopes := make([]auth.Scope, len(in.Scopes))
	for i, sc := range in.Scopes {
		scopes[i] = auth.Scope(sc)
	}
	ttl := time.Duration(in.TTL * float64(time.Second))
	key, rec, err := auth.CreateKey(path, in.Tenant, in.Agent, scopes, ttl, time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.CreatedKey{Key: key, Record: keyToAPI(rec)})
}

// POST /v1/keys/{id}/rotate
func (s *API) handleRotateKey(w http.ResponseWriter, r *http.Request) {
	path, err := s.keyFile()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key, rec, err := auth.RotateKey(path, r.PathValue("id"), time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.CreatedKey{Key: key, Record: keyToAPI(rec)})
}

// DELETE /v1/keys/{id}
func (s *API) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	path, err := s.keyFile()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if _, err := auth.RevokeKey(path, r.PathValue("id"), time.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// keyFile is the key file the routes change; a daemon built without one has no tenant keys to
// manage.
func (s *API) keyFile() (string, error) {
	if path := s.auth.Keys().Path(); path != "" {
		return path, nil
	}
	return "", sandbox.Errorf(sandbox.KindConflict, "this daemon keeps no tenant keys: it was started without a key file").
		WithHint("give the daemon a key file (keys_file in its configuration; the default is DATA_DIR/keys.json)")
}

func keyToAPI(rec auth.KeyRecord) api.Key {
	k := api.Key{ID: rec.ID, Tenant: rec.Tenant, Agent: rec.Agent, Scopes: make([]string, len(rec.Scopes)),
		Created: rec.Created, Expires: rec.Expires, Revoked: rec.Revoked}
	for i, sc := range rec.Scopes {
		k.Scopes[i] = string(sc)
	}
	return k
}
