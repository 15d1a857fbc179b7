package webui

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// loginCookieAge bounds how long a login form stays usable.
const loginCookieAge = 30 * 60

// loginPage shows the login form (or, for someone logged in, where they were going). The form's
// token is double-submitted: the same random value in a cookie only /ui/login receives and in a
// hidden field, so a form posted from another site, which cannot read or set the cookie, fails.
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if c, _ := u.current(r); c != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	u.showLogin(w, r, http.StatusOK, next, "")
}

func (u *UI) showLogin(w http.ResponseWriter, r *http.Request, status int, next, problem string) {
	token := randomToken()
	setCookie(w, r, loginCookie, token, "/ui/login", loginCookieAge)
	u.render(w, r, status, "login", nil, map[string]any{"Token": token, "Next": next, "Problem": problem})
}

// login checks the key and starts a UI session: a new random id in the session cookie, the key
// kept on the server side only.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if err := crossOrigin.Check(r); err != nil {
		u.refuse(w, r, nil, http.StatusForbidden, "cross-origin login refused: "+err.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		u.refuse(w, r, nil, http.StatusBadRequest, "the login form could not be read")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(ck.Value, r.PostForm.Get(csrfField)) {
		u.log.Warn("web console refused a login form without its token", "remote", r.RemoteAddr)
		u.showLogin(w, r, http.StatusForbidden, next, "The login form had expired or did not come from this page. Try again.")
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	addr := clientAddress(r)
	if wait, why := u.limiter.blocked(addr, key); wait > 0 {
		u.log.Warn("web console login refused: too many failures", "remote", r.RemoteAddr, "why", why)
		w.Header().Set("Retry-After", retryAfter(wait))
		u.showLogin(w, r, http.StatusTooManyRequests, next, fmt.Sprintf(
			"Too many failed logins (%s). Try again in %s.", why, wait.Round(time.Second)))
		return
	}
	id, err := u.opts.Keys.Authenticate(key, u.opts.Now())
	if key == "" || err != nil {
		u.limiter.failed(addr, key)
		u.log.Warn("web console login refused", "remote", r.RemoteAddr)
		u.showLogin(w, r, http.StatusUnauthorized, next, "That API key is not valid (unknown, revoked or expired).")
		return
	}
	if old, err := r.Cookie(sessionCookie); err == nil {
		u.sessions.remove(old.Value)
	}
	sid, _ := u.sessions.create(key)
	setCookie(w, r, sessionCookie, sid, Prefix, 0)
	setCookie(w, r, loginCookie, "", "/ui/login", -1)
	u.log.Info("web console login", "key", id.KeyID, "tenant", id.Tenant, "agent", id.Agent)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the UI session (a POST with its token, so another site cannot log a person out).
func (u *UI) logout(w http.ResponseWriter, r *http.Request, c *call) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		u.sessions.remove(ck.Value)
	}
	setCookie(w, r, sessionCookie, "", Prefix, -1)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext keeps a post-login destination inside the console, so the login cannot be made to
// send a person elsewhere.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, "/ui/login") || strings.HasPrefix(next, "/ui/static/") {
		return "/ui/sessions"
	}
	return next
}
