package webui

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/auth"
)

// LoginLimit bounds failed logins to the console, so that keys cannot be guessed at speed from
// one address, nor one key guessed at from many. Zero fields take the defaults.
type LoginLimit struct {
	// PerAddress is how many failed logins one client address may make within Window. Default 10.
	PerAddress int
	// PerKey is how many failed logins may name one key within Window: a tenant key by its id,
	// any other token by its first 8 characters. Default 20.
	PerKey int
	// Window is the sliding window both count in. Default 15 minutes.
	Window time.Duration
}

// maxTracked bounds the addresses and keys the limiter remembers; past it the oldest are forgotten.
const maxTracked = 65536

// loginLimiter counts failed logins per client address and per key prefix in a sliding window.
// A successful login does not count: the limit is for guessing.
type loginLimiter struct {
	lim LoginLimit
	now func() time.Time

	mu    sync.Mutex
	fails map[string][]time.Time // "a:ADDR" or "k:PREFIX" → failures in the window, oldest first
}

func newLoginLimiter(lim LoginLimit, now func() time.Time) *loginLimiter {
	if lim.PerAddress <= 0 {
		lim.PerAddress = 10
	}
	if lim.PerKey <= 0 {
		lim.PerKey = 20
	}
	if lim.Window <= 0 {
		lim.Window = 15 * time.Minute
	}
	return &loginLimiter{lim: lim, now: now, fails: map[string][]time.Time{}}
}

// clientAddress is the address a request came from: the connection's, never a header a client
// could set.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// keyPrefix names the key a login tried without holding it.
func keyPrefix(key string) string {
	if id, _, ok := auth.ParseTenantKey(key); ok {
		return id
	}
	if len(key) > 8 {
		return key[:8]
	}
	return key
}

// blocked says whether a login from addr naming key must wait, and how long.
func (l *loginLimiter) blocked(addr, key string) (time.Duration, string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if wait := l.waitLocked("a:"+addr, l.lim.PerAddress, now); wait > 0 {
		return wait, fmt.Sprintf("%d failed logins from this address within %v", l.lim.PerAddress, l.lim.Window)
	}
	if wait := l.waitLocked("k:"+keyPrefix(key), l.lim.PerKey, now); wait > 0 {
		return wait, fmt.Sprintf("%d failed logins with this key within %v", l.lim.PerKey, l.lim.Window)
	}
	return 0, ""
}

// waitLocked drops the failures of k past the window and returns how long until k is under max.
func (l *loginLimiter) waitLocked(k string, max int, now time.Time) time.Duration {
	f := l.fails[k]
	for len(f) > 0 && now.Sub(f[0]) >= l.lim.Window {
		f = f[1:]
	}
	if len(f) == 0 {
		delete(l.fails, k)
		return 0
	}
	l.fails[k] = f
	if len(f) < max {
		return 0
	}
	return f[len(f)-max].Add(l.lim.Window).Sub(now)
}

// failed counts a failed login from addr naming key.
func (l *loginLimiter) failed(addr, key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.fails) >= maxTracked {
		for k := range l.fails { // forget some at random: a flood cannot grow the table
			delete(l.fails, k)
			if len(l.fails) < maxTracked*3/4 {
				break
			}
		}
	}
	for _, k := range []string{"a:" + addr, "k:" + keyPrefix(key)} {
		f := append(l.fails[k], now)
		if len(f) > max(l.lim.PerAddress, l.lim.PerKey) {
			f = f[1:]
		}
		l.fails[k] = f
	}
}

// retryAfter is the Retry-After header's value for wait: whole seconds, at least 1.
func retryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second)))
}
