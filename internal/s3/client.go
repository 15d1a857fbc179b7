package s3

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config says where a bucket is and how to sign for it.
type Config struct {
	// Endpoint is the server's base URL (http://127.0.0.1:8333, https://s3.eu-west-1.amazonaws.com).
	Endpoint string
	// Region signs requests (SigV4's scope). Default us-east-1, which most compatible servers take.
	Region string
	// Bucket holds everything; Prefix (no leading or trailing slash needed) is put before every key.
	Bucket, Prefix string
	// PathStyle addresses the bucket as ENDPOINT/BUCKET/KEY rather than BUCKET.HOST/KEY. Most
	// self-hosted servers (SeaweedFS, MinIO, Ceph RGW without wildcard DNS) need it.
	PathStyle bool
	// AccessKey, SecretKey and SessionToken (optional) are the credentials.
	AccessKey, SecretKey, SessionToken string
	// HTTP is the client requests go through. Default: a client with no overall timeout (bodies
	// of gigabytes stream through it); every call takes a context.
	HTTP *http.Client
	// PartSize is the size of a multipart upload's parts, for files larger than it. Default 64 MiB.
	PartSize int64
}

// Client is an S3 client for one bucket and prefix. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base *url.URL
	http *http.Client
}

// Errors of the client; a *Error carries the server's answer.
var (
	// ErrNotFound: no object of that key (404), or no bucket.
	ErrNotFound = errors.New("s3: not found")
	// ErrPrecondition: a conditional write or read lost (412 Precondition Failed, or 409
	// ConditionalRequestConflict: another conditional write of the key was under way).
	ErrPrecondition = errors.New("s3: precondition failed")
)

// Error is an error answer of the server.
type Error struct {
	Op, Key string
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("s3: %s %s: %d %s: %s", e.Op, e.Key, e.Status, e.Code, msg)
}

// Is maps statuses onto the client's errors.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrPrecondition:
		return e.Status == http.StatusPreconditionFailed || e.Status == http.StatusConflict && e.Code == "ConditionalRequestConflict"
	}
	return false
}

// New checks cfg and returns a client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.Endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("s3: endpoint %q is not an http(s) URL", cfg.Endpoint)
	}
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket given")
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, errors.New("s3: no credentials (an access key and a secret key)")
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.PartSize <= 0 {
		cfg.PartSize = 64 << 20
	}
	if cfg.PartSize < 5<<20 {
		cfg.PartSize = 5 << 20 // S3's least part size
	}
	hc := cfg.HTTP
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 32
		hc = &http.Client{Transport: tr}
	}
	return &Client{cfg: cfg, base: u, http: hc}, nil
}

// Bucket and Prefix say where the client keeps its objects.
func (c *Client) Bucket() string { return c.cfg.Bucket }
func (c *Client) Prefix() string { return c.cfg.Prefix }

// fullKey puts the prefix before key.
func (c *Client) fullKey(key string) string {
	if c.cfg.Prefix == "" {
		return key
	}
	return c.cfg.Prefix + "/" + key
}

// relKey is the inverse of fullKey for the keys a listing returns.
func (c *Client) relKey(full string) string {
	if c.cfg.Prefix == "" {
		return full
	}
	return strings.TrimPrefix(full, c.cfg.Prefix+"/")
}

// EmptySHA256 is the SHA-256 of no bytes, the payload hash of a request without a body.
const EmptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// unsignedPayload is what a request whose body is not hashed beforehand signs instead (a body
// streamed from a file too large to read twice).
const unsignedPayload = "UNSIGNED-PAYLOAD"

// request builds a signed request. fullKey is the whole object key ("" for the bucket).
func (c *Client) request(ctx context.Context, method, fullKey string, query url.Values, body io.Reader, size int64, payloadHash string, hdr http.Header) (*http.Request, error) {
	u := *c.base
	if c.cfg.PathStyle {
		u.Path = strings.TrimRight(u.Path, "/") + "/" + c.cfg.Bucket
		if fullKey != "" {
			u.Path += "/" + fullKey
		}
	} else {
		u.Host = c.cfg.Bucket + "." + u.Host
		u.Path = strings.TrimRight(u.Path, "/") + "/" + fullKey
	}
	u.RawPath = encodePath(u.Path)
	u.RawQuery = canonicalQuery(query)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		} else if sec, ok := body.(*io.SectionReader); ok {
			// Sent again from the section's start if the request is (do).
			r, off, n := sec.Outer()
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(io.NewSectionReader(r, off, n)), nil }
		}
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if payloadHash == "" {
		payloadHash = EmptySHA256
	}
	c.sign(req, payloadHash, time.Now().UTC())
	return req, nil
}

// sign adds AWS Signature Version 4 headers to req.
func (c *Client) sign(req *http.Request, payloadHash string, now time.Time) {
	amzDate := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if c.cfg.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", c.cfg.SessionToken)
	}
	// Signed: the host and every x-amz-* and conditional header.
	signed := map[string]string{"host": req.URL.Host}
	for k, vs := range req.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") || lk == "if-match" || lk == "if-none-match" || lk == "content-md5" {
			signed[lk] = strings.TrimSpace(strings.Join(vs, ","))
		}
	}
	names := make([]string, 0, len(signed))
	for k := range signed {
		names = append(names, k)
	}
	sort.Strings(names)
	var canonHeaders strings.Builder
	for _, k := range names {
		canonHeaders.WriteString(k + ":" + signed[k] + "\n")
	}
	signedHeaders := strings.Join(names, ";")
	canon := strings.Join([]string{req.Method, req.URL.EscapedPath(), req.URL.RawQuery, canonHeaders.String(), signedHeaders, payloadHash}, "\n")
	scope := day + "/" + c.cfg.Region + "/s3/aws4_request"
	h := sha256.Sum256([]byte(canon))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(h[:])
	k := hmacSHA256([]byte("AWS4"+c.cfg.SecretKey), day)
	k = hmacSHA256(k, c.cfg.Region)
	k = hmacSHA256(k, "s3")
	k = hmacSHA256(k, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(k, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.cfg.AccessKey+"/"+scope+", SignedHeaders="+signedHeaders+", Signature="+sig)
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// encodePath escapes a path as SigV4 wants it: every byte but the unreserved ones and '/'.
func encodePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		ch := p[i]
		if ch == '/' || unreserved(ch) {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

func unreserved(ch byte) bool {
	return 'A' <= ch && ch <= 'Z' || 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_' || ch == '.' || ch == '~'
}

func encodeQueryPart(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if unreserved(s[i]) {
			b.WriteByte(s[i])
		} else {
			fmt.Fprintf(&b, "%%%02X", s[i])
		}
	}
	return b.String()
}

// canonicalQuery is the query sorted by name then value, escaped as SigV4 wants it.
func canonicalQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, encodeQueryPart(k)+"="+encodeQueryPart(v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "&")
}

// Retries. S3 asks clients to send a request again, after a pause that grows, when it answers
// 500 InternalError or 503 SlowDown (and a gateway in front of a compatible server may answer 502
// or 504), and a connection can be lost on the way. do sends a request up to maxAttempts times
// when its answer is one of those or its connection failed (not its context), the pause doubling
// from retryBase with jitter, as long as the request can be sent again: not a POST (a multipart
// upload's create or complete is not idempotent), and a body that can be read again (none, bytes,
// or a section of a file: http.Request.GetBody). The signature is reused: SigV4 accepts a
// request within 15 minutes of its date.
//
// An attempt that failed that way may still have been carried out, so a conditional write sent
// again can find its own write there and lose its precondition: Put then reads the object back
// (conditionalPut).
const maxAttempts = 4

var retryBase = 100 * time.Millisecond // a var: tests shorten it

// retryStatus says whether an answer of this status is worth sending the request again.
func retryStatus(status int) bool {
	switch status {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// do sends a request (again, as Retries say) and turns an error status into an *Error.
func (c *Client) do(req *http.Request, op, key string) (*http.Response, error) {
	resp, _, err := c.send(req, op, key)
	return resp, err
}

// send is do, also saying whether an attempt before the answer may have been carried out by
// the server (it answered 5xx, or the connection was lost).
func (c *Client) send(req *http.Request, op, key string) (resp *http.Response, retried bool, err error) {
	ctx := req.Context()
	again := req.Method != http.MethodPost && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil)
	for attempt := 1; ; attempt++ {
		resp, err = c.http.Do(req)
		switch {
		case err != nil:
			err = fmt.Errorf("s3: %s %s: %w", op, key, err)
			if ctx.Err() != nil {
				return nil, retried, err
			}
		case resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotModified:
			err = readError(resp, op, key)
			resp.Body.Close()
			if !retryStatus(resp.StatusCode) {
				return nil, retried, err
			}
		default:
			return resp, retried, nil
		}
		if !again || attempt == maxAttempts {
			return nil, retried, err
		}
		retried = true
		d := retryBase << (attempt - 1)
		d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, retried, err
		}
		next := req.Clone(ctx)
		if req.GetBody != nil {
			body, berr := req.GetBody()
			if berr != nil {
				return nil, retried, err
			}
			next.Body = body
		}
		req = next
	}
}

func readError(resp *http.Response, op, key string) error {
	e := &Error{Op: op, Key: key, Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var x struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if xml.Unmarshal(b, &x) == nil {
		e.Code, e.Message = x.Code, x.Message
	}
	return e
}

// Object describes a stored object.
type Object struct {
	// Key is relative to the client's prefix.
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
}

func objectOf(key string, resp *http.Response) Object {
	o := Object{Key: key, Size: resp.ContentLength, ETag: resp.Header.Get("ETag")}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		o.LastModified = t
	}
	return o
}

// Get returns an object's body (the caller closes it) and its description.
func (c *Client) Get(ctx context.Context, key string) (io.ReadCloser, Object, error) {
	req, err := c.request(ctx, http.MethodGet, c.fullKey(key), nil, nil, 0, "", nil)
	if err != nil {
		return nil, Object{}, err
	}
	resp, err := c.do(req, "get", key)
	if err != nil {
		return nil, Object{}, err
	}
	return resp.Body, objectOf(key, resp), nil
}

// GetBytes reads a small object whole.
func (c *Client) GetBytes(ctx context.Context, key string) ([]byte, Object, error) {
	body, o, err := c.Get(ctx, key)
	if err != nil {
		return nil, o, err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, o, fmt.Errorf("s3: get %s: %w", key, err)
	}
	return b, o, nil
}

// Head describes an object. The server's clock at the answer is in Date (for ages measured on
// one clock).
func (c *Client) Head(ctx context.Context, key string) (o Object, date time.Time, err error) {
	req, err := c.request(ctx, http.MethodHead, c.fullKey(key), nil, nil, 0, "", nil)
	if err != nil {
		return Object{}, time.Time{}, err
	}
	resp, err := c.do(req, "head", key)
	if err != nil {
		return Object{}, time.Time{}, err
	}
	resp.Body.Close()
	date, _ = http.ParseTime(resp.Header.Get("Date"))
	return objectOf(key, resp), date, nil
}

// PutOptions make a write conditional.
type PutOptions struct {
	// IfNoneMatch: write only if no object has the key (If-None-Match: *); else ErrPrecondition.
	IfNoneMatch bool
	// IfMatch: write only if the object's ETag is this one (If-Match); else ErrPrecondition.
	IfMatch string
	// SHA256 is the body's SHA-256 in hex, signed as the payload's hash; empty: the payload is
	// sent unsigned (UNSIGNED-PAYLOAD), for a body streamed without reading it twice.
	SHA256      string
	ContentType string
}

// Put writes size bytes from body as key and returns the new object's ETag.
func (c *Client) Put(ctx context.Context, key string, body io.Reader, size int64, opts PutOptions) (string, error) {
	hdr := http.Header{}
	if opts.IfNoneMatch {
		hdr.Set("If-None-Match", "*")
	}
	if opts.IfMatch != "" {
		hdr.Set("If-Match", opts.IfMatch)
	}
	if opts.ContentType != "" {
		hdr.Set("Content-Type", opts.ContentType)
	}
	hash := opts.SHA256
	if hash == "" {
		hash = unsignedPayload
	}
	if body == nil {
		body = http.NoBody
	}
	req, err := c.request(ctx, http.MethodPut, c.fullKey(key), nil, body, size, hash, hdr)
	if err != nil {
		return "", err
	}
	resp, retried, err := c.send(req, "put", key)
	if err != nil {
		if retried && errors.Is(err, ErrPrecondition) && (opts.IfNoneMatch || opts.IfMatch != "") && opts.SHA256 != "" {
			return c.conditionalPut(ctx, key, opts.SHA256, err)
		}
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("ETag"), nil
}

// conditionalPut settles a conditional write that lost its precondition (lost) after an attempt
// that may have been carried out: if the object holds the bytes of the write (their SHA-256),
// the earlier attempt wrote it and the write succeeded, with the object's ETag; otherwise
// another writer's write is there and the write lost. (A write the server is still carrying
// out when the object is read is not seen: the write is reported lost.)
func (c *Client) conditionalPut(ctx context.Context, key, sha256hex string, lost error) (string, error) {
	body, o, err := c.Get(ctx, key)
	if err != nil {
		return "", lost
	}
	defer body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, body); err != nil || hex.EncodeToString(h.Sum(nil)) != sha256hex {
		return "", lost
	}
	return o.ETag, nil
}

// PutBytes writes b as key (its hash signed).
func (c *Client) PutBytes(ctx context.Context, key string, b []byte, opts PutOptions) (string, error) {
	h := sha256.Sum256(b)
	opts.SHA256 = hex.EncodeToString(h[:])
	return c.Put(ctx, key, strings.NewReader(string(b)), int64(len(b)), opts)
}

// PutFile uploads the file at path as key, streamed from disk: one PUT up to the part size
// (sha256, when known, is signed), a multipart upload of parts of that size beyond it. Nothing
// is held in memory but a part's hash state.
func (c *Client) PutFile(ctx context.Context, key, path, sha256hex string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("s3: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("s3: %w", err)
	}
	if st.Size() <= c.cfg.PartSize {
		_, err := c.Put(ctx, key, io.NewSectionReader(f, 0, st.Size()), st.Size(), PutOptions{SHA256: sha256hex})
		return err
	}
	return c.multipart(ctx, key, f, st.Size())
}

// multipart uploads size bytes of f in parts of the configured size, each part's hash signed
// (the part is read twice: once to hash it, once to send it).
func (c *Client) multipart(ctx context.Context, key string, f *os.File, size int64) error {
	full := c.fullKey(key)
	req, err := c.request(ctx, http.MethodPost, full, url.Values{"uploads": {""}}, http.NoBody, 0, "", nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, "create multipart upload", key)
	if err != nil {
		return err
	}
	var created struct {
		UploadID string `xml:"UploadId"`
	}
	err = xml.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&created)
	resp.Body.Close()
	if err != nil || created.UploadID == "" {
		return fmt.Errorf("s3: create multipart upload %s: no upload id in the answer (%v)", key, err)
	}
	abort := func() {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if req, err := c.request(actx, http.MethodDelete, full, url.Values{"uploadId": {created.UploadID}}, nil, 0, "", nil); err == nil {
			if resp, err := c.do(req, "abort multipart upload", key); err == nil {
				resp.Body.Close()
			}
		}
	}
	type part struct {
		Number int    `xml:"PartNumber"`
		ETag   string `xml:"ETag"`
	}
	n := int((size + c.cfg.PartSize - 1) / c.cfg.PartSize)
	parts := make([]part, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, transfers)
	var wg sync.WaitGroup
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range n {
		off := int64(i) * c.cfg.PartSize
		ln := min(c.cfg.PartSize, size-off)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-pctx.Done():
				errs <- pctx.Err()
				return
			}
			defer func() { <-sem }()
			etag, err := c.uploadPart(pctx, full, key, created.UploadID, i+1, io.NewSectionReader(f, off, ln), ln)
			if err != nil {
				errs <- err
				cancel()
				return
			}
			parts[i] = part{i + 1, etag}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			abort()
			return err
		}
	}
	body, _ := xml.Marshal(struct {
		XMLName xml.Name `xml:"CompleteMultipartUpload"`
		Parts   []part   `xml:"Part"`
	}{Parts: parts})
	h := sha256.Sum256(body)
	req, err = c.request(ctx, http.MethodPost, full, url.Values{"uploadId": {created.UploadID}}, strings.NewReader(string(body)), int64(len(body)), hex.EncodeToString(h[:]), nil)
	if err != nil {
		abort()
		return err
	}
	resp, err = c.do(req, "complete multipart upload", key)
	if err != nil {
		abort()
		return err
	}
	// A completion can fail inside a 200 answer (S3's documented quirk): look for an Error.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	var x struct {
		XMLName xml.Name
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if xml.Unmarshal(b, &x) == nil && x.XMLName.Local == "Error" {
		abort()
		return &Error{Op: "complete multipart upload", Key: key, Status: http.StatusInternalServerError, Code: x.Code, Message: x.Message}
	}
	return nil
}

// transfers is how many parts of one object go up or down at once: a single stream of a
// compatible server is often bound by one of its cores (chunk lookups, hashing), not the network.
const transfers = 4

// uploadPart sends one part of a multipart upload (its hash signed: the section is read twice).
func (c *Client) uploadPart(ctx context.Context, full, key, uploadID string, number int, sec *io.SectionReader, ln int64) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, sec); err != nil {
		return "", fmt.Errorf("s3: upload %s: %w", key, err)
	}
	if _, err := sec.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	q := url.Values{"partNumber": {strconv.Itoa(number)}, "uploadId": {uploadID}}
	req, err := c.request(ctx, http.MethodPut, full, q, sec, ln, hex.EncodeToString(h.Sum(nil)), nil)
	if err != nil {
		return "", err
	}
	resp, err := c.do(req, "upload part", key)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("ETag"), nil
}

// GetFile downloads an object into f (from its start) and returns its size: one ranged GET of
// the first part size (whose answer also says the object's size: no HEAD first, a round trip
// less per object), then ranged GETs of that size beyond it, a few at once, while the first
// part is being read. The bytes written are checked against the object's size; their content
// is the caller's to check.
func (c *Client) GetFile(ctx context.Context, key string, f *os.File) (int64, error) {
	hdr := http.Header{"Range": {fmt.Sprintf("bytes=0-%d", c.cfg.PartSize-1)}}
	req, err := c.request(ctx, http.MethodGet, c.fullKey(key), nil, nil, 0, "", hdr)
	if err != nil {
		return 0, err
	}
	resp, err := c.do(req, "get", key)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusRequestedRangeNotSatisfiable {
			return 0, nil // an empty object: no byte is in any range
		}
		return 0, err
	}
	defer resp.Body.Close()
	size, first := resp.ContentLength, resp.ContentLength
	if resp.StatusCode == http.StatusPartialContent {
		// Content-Range: bytes 0-N/TOTAL
		cr := resp.Header.Get("Content-Range")
		i := strings.LastIndexByte(cr, '/')
		total, perr := strconv.ParseInt(cr[i+1:], 10, 64)
		if i < 0 || perr != nil {
			return 0, fmt.Errorf("s3: get %s: a range answer with Content-Range %q", key, cr)
		}
		size = total
	}
	if first < 0 {
		return 0, fmt.Errorf("s3: get %s: an answer without a length", key)
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 1+(size/max(c.cfg.PartSize, 1)))
	sem := make(chan struct{}, transfers-1)
	etag := resp.Header.Get("ETag")
	for off := first; off < size; off += c.cfg.PartSize {
		ln := min(c.cfg.PartSize, size-off)
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-gctx.Done():
				errs <- gctx.Err()
				return
			}
			defer func() { <-sem }()
			if err := c.getRange(gctx, key, etag, f, off, ln); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	n, err := io.Copy(io.NewOffsetWriter(f, 0), resp.Body)
	if err == nil && n != first {
		err = fmt.Errorf("s3: get %s: %d bytes of %d", key, n, first)
	}
	if err != nil {
		cancel()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		if err == nil {
			err = e
		}
	}
	if err != nil {
		return 0, err
	}
	return size, nil
}

// getRange copies bytes [off, off+ln) of the object (of ETag etag: a rewrite meanwhile fails the
// read) into f at off.
func (c *Client) getRange(ctx context.Context, key, etag string, f *os.File, off, ln int64) error {
	hdr := http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", off, off+ln-1)}}
	if etag != "" {
		hdr.Set("If-Match", etag)
	}
	req, err := c.request(ctx, http.MethodGet, c.fullKey(key), nil, nil, 0, "", hdr)
	if err != nil {
		return err
	}
	resp, err := c.do(req, "get", key)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		return fmt.Errorf("s3: get %s: a range request answered %d", key, resp.StatusCode)
	}
	n, err := io.Copy(io.NewOffsetWriter(f, off), resp.Body)
	if err == nil && n != ln {
		err = fmt.Errorf("s3: get %s: %d bytes of the range at %d, want %d", key, n, off, ln)
	}
	return err
}

// Delete removes an object; a missing one is no error.
func (c *Client) Delete(ctx context.Context, key string) error {
	req, err := c.request(ctx, http.MethodDelete, c.fullKey(key), nil, nil, 0, "", nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, "delete", key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// List calls fn with every object whose key starts with prefix (relative to the client's), in
// key order, page by page (ListObjectsV2). It returns the server's clock at the first answer.
func (c *Client) List(ctx context.Context, prefix string, fn func(Object) error) (time.Time, error) {
	var token string
	var date time.Time
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {c.fullKey(prefix)}}
		if c.cfg.Prefix != "" && prefix == "" {
			q.Set("prefix", c.cfg.Prefix+"/")
		}
		if token != "" {
			q.Set("continuation-token", token)
		}
		req, err := c.request(ctx, http.MethodGet, "", q, nil, 0, "", nil)
		if err != nil {
			return date, err
		}
		resp, err := c.do(req, "list", prefix)
		if err != nil {
			return date, err
		}
		if date.IsZero() {
			date, _ = http.ParseTime(resp.Header.Get("Date"))
		}
		var page struct {
			Contents []struct {
				Key          string    `xml:"Key"`
				Size         int64     `xml:"Size"`
				ETag         string    `xml:"ETag"`
				LastModified time.Time `xml:"LastModified"`
			} `xml:"Contents"`
			IsTruncated           bool   `xml:"IsTruncated"`
			NextContinuationToken string `xml:"NextContinuationToken"`
		}
		err = xml.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return date, fmt.Errorf("s3: list %s: %w", prefix, err)
		}
		for _, o := range page.Contents {
			if err := fn(Object{Key: c.relKey(o.Key), Size: o.Size, ETag: o.ETag, LastModified: o.LastModified}); err != nil {
				return date, err
			}
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			return date, nil
		}
		token = page.NextContinuationToken
	}
}

// CreateBucket makes the client's bucket; one that exists already (and is the caller's) is no
// error.
func (c *Client) CreateBucket(ctx context.Context) error {
	req, err := c.request(ctx, http.MethodPut, "", nil, http.NoBody, 0, "", nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, "create bucket", c.cfg.Bucket)
	var e *Error
	if errors.As(err, &e) && (e.Code == "BucketAlreadyOwnedByYou" || e.Code == "BucketAlreadyExists") {
		return nil
	}
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
