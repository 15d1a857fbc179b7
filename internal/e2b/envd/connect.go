package envd

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The Connect protocol as E2B's SDK speaks it: JSON messages (the JS SDK builds its transport with
// useBinaryFormat false), no compression. A unary call is a POST of application/json whose answer
// is the message, or an error as {"code", "message"} with the code's HTTP status. A streaming call
// (application/connect+json) sends and answers envelopes: one flags byte, a 4-byte big-endian
// length, the JSON; the last envelope the server sends has flag endStream and carries {} or
// {"error": {...}}, always under HTTP 200.

const (
	flagCompressed = 0x01
	flagEndStream  = 0x02

	// maxMessage bounds a request message: envd's requests are small (a command line, a path,
	// a chunk of stdin), the largest being SendInput's stdin, itself within MaxCommandStdin.
	maxMessage = 1 << 20
)

// Connect error codes (connectrpc.com's names).
const (
	codeCanceled           = "canceled"
	codeUnknown            = "unknown"
	codeInvalidArgument    = "invalid_argument"
	codeDeadlineExceeded   = "deadline_exceeded"
	codeNotFound           = "not_found"
	codeAlreadyExists      = "already_exists"
	codePermissionDenied   = "permission_denied"
	codeResourceExhausted  = "resource_exhausted"
	codeFailedPrecondition = "failed_precondition"
	codeUnimplemented      = "unimplemented"
	codeInternal           = "internal"
	codeUnavailable        = "unavailable"
	codeUnauthenticated    = "unauthenticated"
)

// rpcError is an error as Connect carries it.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (e *rpcError) Error() string { return e.Code + ": " + e.Message }

// errorf makes an rpcError.
func errorf(code, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// notImplemented is the answer to a call agentbox does not serve: it names the call, so a
// program meets a clear error instead of silence.
func notImplemented(call, why string) *rpcError {
	return errorf(codeUnimplemented, "agentbox does not implement %s: %s", call, why)
}

// toRPC turns an error of the core into a Connect error: its kind becomes the code E2B's SDK maps
// to the same class of error (not_found to NotFoundError, invalid_argument to
// InvalidArgumentError...), its message and hint the message.
func toRPC(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	msg := err.Error()
	if e := sandbox.AsError(err); e != nil && e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	if sandbox.KindOf(err) == sandbox.KindInternal {
		// As agentbox's own API: a fault's text is for the daemon's log, not for the caller.
		slog.Error("e2b envd: internal error", "err", err)
		msg = "internal error: the daemon's log has the details"
	}
	code := codeInternal
	switch sandbox.KindOf(err) {
	case sandbox.KindInvalidRequest, sandbox.KindOutputLimit:
		code = codeInvalidArgument
	case sandbox.KindNotFound:
		code = codeNotFound
	case sandbox.KindUnauthorized:
		code = codeUnauthenticated
	case sandbox.KindForbidden, sandbox.KindPolicyViolation:
		code = codePermissionDenied
	case sandbox.KindTimeout:
		code = codeDeadlineExceeded
	case sandbox.KindMemoryLimit:
		code = codeResourceExhausted
	case sandbox.KindConflict:
		code = codeFailedPrecondition
	case sandbox.KindRuntimeUnavailable:
		code = codeUnavailable
	case sandbox.KindNotImplemented:
		code = codeUnimplemented
	}
	return &rpcError{Code: code, Message: msg}
}

// httpStatus is the HTTP status of a unary error (the Connect protocol's table).
func httpStatus(code string) int {
	switch code {
	case codeCanceled:
		return 499
	case codeInvalidArgument, codeFailedPrecondition:
		return http.StatusBadRequest
	case codeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case codeNotFound:
		return http.StatusNotFound
	case codeAlreadyExists:
		return http.StatusConflict
	case codePermissionDenied:
		return http.StatusForbidden
	case codeResourceExhausted:
		return http.StatusTooManyRequests
	case codeUnimplemented:
		return http.StatusNotImplemented
	case codeUnavailable:
		return http.StatusServiceUnavailable
	case codeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// writeUnaryError answers a unary call with err.
func writeUnaryError(w http.ResponseWriter, err error) {
	re := toRPC(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus(re.Code))
	_ = json.NewEncoder(w).Encode(re)
}

// writeUnary answers a unary call with msg.
func writeUnary(w http.ResponseWriter, msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		writeUnaryError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// readUnary decodes a unary call's request message into v.
func readUnary(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil {
		return errorf(codeInvalidArgument, "reading the request: %v", err)
	}
	if len(b) > maxMessage {
		return errorf(codeResourceExhausted, "the request message is over %d bytes", maxMessage)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(codeInvalidArgument, "the request message is not the JSON the call takes: %v", err)
	}
	return nil
}

// readEnvelope reads one envelope of a streaming request: its flags and JSON. io.EOF at a clean
// end.
func readEnvelope(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, nil, errorf(codeInvalidArgument, "the request ends inside an envelope's header")
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxMessage {
		return 0, nil, errorf(codeResourceExhausted, "a request message of %d bytes is over %d", n, maxMessage)
	}
	if h[0]&flagCompressed != 0 {
		return 0, nil, errorf(codeUnimplemented, "compressed messages are not accepted; send them uncompressed")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, errorf(codeInvalidArgument, "the request ends inside a message")
	}
	return h[0], b, nil
}

// readStreamRequest decodes the one request message of a server-streaming call.
func readStreamRequest(r *http.Request, v any) error {
	_, b, err := readEnvelope(io.LimitReader(r.Body, maxMessage+5))
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errorf(codeInvalidArgument, "the request message is not the JSON the call takes: %v", err)
	}
	return nil
}

// stream is the answer of a streaming call: envelopes flushed as they are sent.
type stream struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	bw  *bufio.Writer
	rc  *http.ResponseController
	err error
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w, bw: bufio.NewWriter(w), rc: http.NewResponseController(w)}
}

func (s *stream) envelope(flags byte, msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	var h [5]byte
	h[0] = flags
	binary.BigEndian.PutUint32(h[1:], uint32(len(b)))
	s.bw.Write(h[:])
	s.bw.Write(b)
	if err := s.bw.Flush(); err != nil {
		s.err = err
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
	}
	return s.err
}

// send sends one message.
func (s *stream) send(msg any) error { return s.envelope(0, msg) }

// end ends the stream, with err or without.
func (s *stream) end(err error) {
	type endStream struct {
		Error *rpcError `json:"error,omitempty"`
	}
	var e endStream
	if err != nil {
		e.Error = toRPC(err)
	}
	_ = s.envelope(flagEndStream, e)
}

// timeoutOf reads Connect-Timeout-Ms: how long the client lets the call run (0: no limit).
func timeoutOf(r *http.Request) time.Duration {
	ms, err := strconv.ParseInt(r.Header.Get("Connect-Timeout-Ms"), 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// keepaliveOf reads Keepalive-Ping-Interval (seconds): how often a streaming answer sends a
// keepalive event while idle, so proxies between keep the connection. Default 90 s, as envd.
func keepaliveOf(r *http.Request) time.Duration {
	s, err := strconv.Atoi(r.Header.Get("Keepalive-Ping-Interval"))
	if err != nil || s <= 0 {
		return 90 * time.Second
	}
	return time.Duration(s) * time.Second
}
