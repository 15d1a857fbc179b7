package auth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/auth"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

const key = "test-key-0123456789"

func TestBearerCheck(t *testing.T) {
	t.Parallel()
	b, err := auth.NewBearer(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, header string
		ok           bool
	}{
		{"right key", "Bearer " + key, true},
		{"scheme in any case", "bearer " + key, true},
		{"spaces around the key", "Bearer  " + key + " ", true},
		{"no header", "", false},
		{"no key", "Bearer ", false},
		{"no scheme", key, false},
		{"other scheme", "Basic " + key, false},
		{"wrong key", "Bearer wrong", false},
		{"key prefix", "Bearer " + key[:5], false},
		{"key and more", "Bearer " + key + "x", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/sessions", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			err := b.Check(r)
			if tt.ok != (err == nil) {
				t.Fatalf("Check = %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				if e := sandbox.AsError(err); e.Kind != sandbox.KindUnauthorized || e.Hint == "" {
					t.Errorf("error %+v, want unauthorized with a hint", e)
				}
			}
		})
	}
}

func TestNewBearerNeedsAKey(t *testing.T) {
	t.Parallel()
	if _, err := auth.NewBearer(""); err == nil {
		t.Error("an empty key was accepted")
	}
}

func TestRequire(t *testing.T) {
	t.Parallel()
	b, _ := auth.NewBearer(key)
	var failed error
	h := b.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }),
		func(w http.ResponseWriter, r *http.Request, err error) {
			failed = err
			w.WriteHeader(http.StatusUnauthorized)
		})

	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTeapot || failed != nil {
		t.Errorf("with the key: status %d, fail called with %v", w.Code, failed)
	}

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	var e *sandbox.Error
	if w.Code != http.StatusUnauthorized || !errors.As(failed, &e) || e.Kind != sandbox.KindUnauthorized ||
		w.Header().Get("WWW-Authenticate") != `Bearer realm="agentbox"` {
		t.Errorf("without the key: status %d, header %q, fail called with %v", w.Code, w.Header().Get("WWW-Authenticate"), failed)
	}
}

func TestRequestKey(t *testing.T) {
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"none", nil, ""},
		{"X-API-Key", map[string]string{"X-API-Key": " k1 "}, "k1"},
		{"bearer", map[string]string{"Authorization": "Bearer k2"}, "k2"},
		{"bearer in any case", map[string]string{"Authorization": "bEaReR k3"}, "k3"},
		{"X-API-Key first", map[string]string{"X-API-Key": "k4", "Authorization": "Bearer k5"}, "k4"},
		{"another scheme", map[string]string{"Authorization": "Basic k6"}, ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		if got := auth.RequestKey(r); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
