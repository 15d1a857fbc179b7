package webui

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbox-dev/agentbox/internal/auth"
)

// contentSecurityPolicy lets a page load only the console's own script, style sheet and images:
// no inline script or style (so an escaped string that slipped through could still not run), no
// plugins, no framing, forms posting only here.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// setSecurityHeaders sets the headers every answer of the console carries. Pages are never
// cached (they show sessions and records); the embedded assets may be, revalidated.
func setSecurityHeaders(h http.Header, static bool) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if static {
		h.Set("Cache-Control", "no-cache")
	} else {
		h.Set("Cache-Control", "no-store")
	}
}

// Cookie names. The session cookie holds only a random id; the login cookie holds the login
// form's token for the double submit.
const (
	sessionCookie = "agentbox_ui"
	loginCookie   = "agentbox_ui_login"
	csrfField     = "csrf"
	csrfHeader    = "X-CSRF-Token"
)

// randomToken returns 256 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics where it could)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameToken compares two tokens in constant time (over their hashes, so their lengths do not
// leak either). An empty token matches nothing.
func sameToken(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// setCookie sets a cookie of the console: HttpOnly, SameSite=Strict, Secure when the request
// came over TLS, scoped to path. maxAge 0 is a browser-session cookie, -1 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

// call is one request of a logged-in person: who the kept key says they are (authenticated again
// now), the engine as they see it, and their UI session (for its CSRF token).
type call struct {
	id      auth.Identity
	view    View
	session *uiSession
}

// who names the caller for the page header.
func (c *call) who() string {
	id := c.id
	switch {
	case id.Tenant != "" && id.Agent != "":
		return id.Tenant + " / " + id.Agent
	case id.Tenant != "":
		return id.Tenant
	case id.Admin:
		return "daemon admin"
	}
	return id.KeyID
}

// current returns the call of r's UI session, or why there is none.
func (u *UI) current(r *http.Request) (*call, string) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, "not logged in"
	}
	s, ok := u.sessions.get(ck.Value)
	if !ok {
		return nil, "the UI session has ended (logged out, idle or too old)"
	}
	id, err := u.opts.Keys.AuthenticateDigest(s.key, u.opts.Now())
	if err != nil {
		// The key was revoked or expired since the login: the UI session goes with it.
		u.sessions.remove(ck.Value)
		return nil, "the API key of this UI session is no longer valid"
	}
	return &call{id: id, view: u.opts.Engine.As(id.Caller), session: s}, ""
}

// page wraps a GET page: without a UI session the person is sent to the login, and back here
// after it.
func (u *UI) page(h func(http.ResponseWriter, *http.Request, *call)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, why := u.current(r)
		if c == nil {
			if strings.HasPrefix(r.URL.Path, "/ui/artifacts/") {
				// An image, not a page: a redirect to a login form would only show as broken.
				u.errorPage(w, r, nil, http.StatusUnauthorized, "Not logged in", why+".")
				return
			}
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, c)
	})
}

// crossOrigin refuses a state change that a browser says came from another site (Sec-Fetch-Site),
// or whose Origin is not this host.
var crossOrigin = http.NewCrossOriginProtection()

// change wraps a POST that changes something: it needs the UI session (401 without), a request
// from this origin, and the session's synchronizer token in the form field csrf or the header
// X-CSRF-Token (403 without). Nothing is changed before all three hold.
func (u *UI) change(h func(http.ResponseWriter, *http.Request, *call)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := crossOrigin.Check(r); err != nil {
			u.refuse(w, r, nil, http.StatusForbidden, "cross-origin request refused: "+err.Error())
			return
		}
		c, why := u.current(r)
		if c == nil {
			u.refuse(w, r, nil, http.StatusUnauthorized, why)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		token := r.Header.Get(csrfHeader)
		if token == "" {
			token = r.PostFormValue(csrfField)
		}
		if !sameToken(token, c.session.csrf) {
			u.refuse(w, r, c, http.StatusForbidden, "the form's CSRF token is missing or wrong: reload the page and try again")
			return
		}
		h(w, r, c)
	})
}

// refuse answers a refused change and logs it.
func (u *UI) refuse(w http.ResponseWriter, r *http.Request, c *call, status int, why string) {
	u.log.Warn("web console refused a change", "path", r.URL.Path, "status", status, "why", why)
	title := "Refused"
	if status == http.StatusUnauthorized {
		title = "Not logged in"
	}
	u.errorPage(w, r, c, status, title, why+".")
}

// allows is the scope check of a page: nil, or the forbidden error auth words.
func allows(c *call, what string, scopes ...auth.Scope) error {
	return c.id.Allows(what, scopes...)
}
