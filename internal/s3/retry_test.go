package s3

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// flaky is a server of one bucket that fails the requests its fail function picks, for the
// client's retries (the client against a real server: client_test.go). It keeps objects in
// memory and honours If-None-Match: * and If-Match on PUT.
type flaky struct {
	mu      sync.Mutex
	objects map[string][]byte
	bodies  [][]byte // every PUT body received, in order
	methods []string // every request's method, in order
	// fail answers the n-th request (from 1) with a status, or 0 to serve it; applyFirst: a
	// failed PUT is carried out before its failure is answered (an ambiguous 500).
	fail       func(n int, r *http.Request) int
	applyFirst bool
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.methods = append(f.methods, r.Method)
	key := strings.TrimPrefix(r.URL.Path, "/b/")
	status := 0
	if f.fail != nil {
		status = f.fail(len(f.methods), r)
	}
	if status == lostConnection {
		// The connection ends without an answer, as a reset on the way would.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if status != 0 && !(f.applyFirst && r.Method == http.MethodPut) {
		w.WriteHeader(status)
		fmt.Fprintf(w, "<Error><Code>Flaky</Code><Message>status %d</Message></Error>", status)
		return
	}
	switch r.Method {
	case http.MethodGet:
		b, ok := f.objects[key]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("ETag", etagOf(b))
		w.Write(b)
	case http.MethodPut:
		f.bodies = append(f.bodies, body)
		old, exists := f.objects[key]
		if r.Header.Get("If-None-Match") == "*" && exists || r.Header.Get("If-Match") != "" && (!exists || r.Header.Get("If-Match") != etagOf(old)) {
			w.WriteHeader(http.StatusPreconditionFailed)
			fmt.Fprint(w, "<Error><Code>PreconditionFailed</Code></Error>")
			return
		}
		f.objects[key] = body
		if status != 0 { // applyFirst
			w.WriteHeader(status)
			return
		}
		w.Header().Set("ETag", etagOf(body))
	case http.MethodPost:
		w.WriteHeader(http.StatusOK)
	}
}

// lostConnection, as a fail function's answer, closes the connection without answering.
const lostConnection = -1

func etagOf(b []byte) string {
	h := md5.Sum(b)
	return `"` + hex.EncodeToString(h[:]) + `"`
}

func flakyClient(t *testing.T, f *flaky) *Client {
	t.Helper()
	old := retryBase
	retryBase = time.Millisecond
	t.Cleanup(func() { retryBase = old })
	if f.objects == nil {
		f.objects = map[string][]byte{}
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(Config{Endpoint: srv.URL, Bucket: "b", PathStyle: true, AccessKey: "k", SecretKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A 500, 502, 503 or 504, or a lost connection, is sent again, with the same body, until it
// succeeds or the attempts are used up; other errors are not sent again.
func TestRetriesTransientStatuses(t *testing.T) {
	ctx := context.Background()
	for _, status := range []int{500, 502, 503, 504} {
		f := &flaky{fail: func(n int, _ *http.Request) int {
			if n <= 2 {
				return status
			}
			return 0
		}}
		c := flakyClient(t, f)
		if _, err := c.PutBytes(ctx, "k", []byte("body"), PutOptions{}); err != nil {
			t.Fatalf("%d twice, then served: %v", status, err)
		}
		if len(f.bodies) != 1 || string(f.bodies[0]) != "body" || len(f.methods) != 3 {
			t.Fatalf("%d twice: %d requests, bodies served %q", status, len(f.methods), f.bodies)
		}
	}
	// A connection lost before the answer is sent again too.
	lost := &flaky{objects: map[string][]byte{"k": []byte("v")}, fail: func(n int, _ *http.Request) int {
		if n == 1 {
			return lostConnection
		}
		return 0
	}}
	c0 := flakyClient(t, lost)
	if b, _, err := c0.GetBytes(ctx, "k"); err != nil || string(b) != "v" || len(lost.methods) != 2 {
		t.Fatalf("a lost connection, then served: %q %v after %d requests", b, err, len(lost.methods))
	}
	always := &flaky{fail: func(int, *http.Request) int { return 503 }}
	c := flakyClient(t, always)
	_, _, err := c.GetBytes(ctx, "k")
	var e *Error
	if !errors.As(err, &e) || e.Status != 503 || len(always.methods) != maxAttempts {
		t.Fatalf("503 always: %v after %d requests, want a 503 *Error after %d", err, len(always.methods), maxAttempts)
	}
	refused := &flaky{fail: func(int, *http.Request) int { return 403 }}
	c = flakyClient(t, refused)
	if _, _, err := c.GetBytes(ctx, "k"); err == nil || len(refused.methods) != 1 {
		t.Fatalf("403: %v after %d requests, want an error after one", err, len(refused.methods))
	}
	// A POST (a multipart upload's create or complete) is not idempotent: sent once.
	post := &flaky{fail: func(int, *http.Request) int { return 500 }}
	c = flakyClient(t, post)
	req, err := c.request(ctx, http.MethodPost, "k", nil, http.NoBody, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.do(req, "post", "k"); err == nil || len(post.methods) != 1 {
		t.Fatalf("POST: %v after %d requests, want an error after one", err, len(post.methods))
	}
}

// A file's upload is sent again from the file's start.
func TestRetriedFileUploadSendsTheWholeFile(t *testing.T) {
	f := &flaky{fail: func(n int, _ *http.Request) int {
		if n == 1 {
			return 503
		}
		return 0
	}}
	c := flakyClient(t, f)
	path := filepath.Join(t.TempDir(), "blob")
	content := strings.Repeat("0123456789", 1000)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(content))
	if err := c.PutFile(context.Background(), "blob", path, hex.EncodeToString(h[:])); err != nil {
		t.Fatal(err)
	}
	if got := string(f.objects["blob"]); got != content {
		t.Fatalf("the object holds %d bytes, want the file's %d", len(got), len(content))
	}
}

// A conditional write whose first attempt was carried out but answered 500 finds its own write
// on the retry: it succeeds, with the object's ETag. One that finds another writer's write there
// loses with ErrPrecondition.
func TestConditionalWriteAfterAnAmbiguousFailure(t *testing.T) {
	ctx := context.Background()
	first := func(n int, _ *http.Request) int {
		if n == 1 {
			return 500
		}
		return 0
	}
	f := &flaky{fail: first, applyFirst: true}
	c := flakyClient(t, f)
	etag, err := c.PutBytes(ctx, "rec", []byte("mine"), PutOptions{IfNoneMatch: true})
	if err != nil || etag != etagOf([]byte("mine")) {
		t.Fatalf("create after an ambiguous 500: %q %v, want the object's ETag", etag, err)
	}
	f.methods, f.fail = nil, first
	etag2, err := c.PutBytes(ctx, "rec", []byte("mine, second"), PutOptions{IfMatch: etag})
	if err != nil || etag2 != etagOf([]byte("mine, second")) {
		t.Fatalf("replace after an ambiguous 500: %q %v", etag2, err)
	}
	// Another writer's object: the retry's precondition fails and the object is not ours.
	other := &flaky{objects: map[string][]byte{"rec": []byte("theirs")}, fail: func(n int, _ *http.Request) int {
		if n == 1 {
			return 503
		}
		return 0
	}}
	c = flakyClient(t, other)
	if _, err := c.PutBytes(ctx, "rec", []byte("mine"), PutOptions{IfNoneMatch: true}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("create where another writer's object is: %v, want ErrPrecondition", err)
	}
	// Without a retry, a lost precondition is not read back.
	plain := &flaky{objects: map[string][]byte{"rec": []byte("mine")}}
	c = flakyClient(t, plain)
	if _, err := c.PutBytes(ctx, "rec", []byte("mine"), PutOptions{IfNoneMatch: true}); !errors.Is(err, ErrPrecondition) || len(plain.methods) != 1 {
		t.Fatalf("create where the same bytes already are, first attempt: %v after %d requests", err, len(plain.methods))
	}
}

// The pause between attempts ends with the request's context.
func TestRetryWaitEndsWithTheContext(t *testing.T) {
	f := &flaky{fail: func(int, *http.Request) int { return 503 }}
	c := flakyClient(t, f)
	retryBase = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := c.GetBytes(ctx, "k")
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("%v after %v", err, time.Since(start))
	}
}
