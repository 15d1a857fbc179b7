package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/agentbox-dev/agentbox/internal/apiwire"
)

// writeBytes answers 200 with b as a file's raw bytes.
func writeBytes(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// readRaw reads a request's body as a file's raw bytes, up to the API's body limit; over it, it
// answers 413 and returns false.
func (s *API) readRaw(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > s.maxBody {
		s.fail(w, r, tooLarge(s.maxBody))
		return nil, false
	}
	b, err := io.ReadAll(http.MaxBytesReader(baseWriter(w), r.Body, s.maxBody))
	if err != nil {
		s.fail(w, r, tooLarge(s.maxBody))
		return nil, false
	}
	return b, true
}

// writeJSON writes v with status. HTML characters stay as they are: outputs are shown to people
// and agents, not embedded in pages.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only unencodable types get here, which is a bug in this package.
		http.Error(w, `{"error":{"code":"internal","message":"response could not be encoded","hint":""}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decode reads exactly one JSON object of at most maxBody bytes into v. Unknown fields, wrong
// types, trailing data and oversized bodies are refused with a message that names the problem.
// An empty body is allowed when optional is set and leaves v as it is.
func decode(w http.ResponseWriter, r *http.Request, maxBody int64, v any, optional bool) error {
	if r.ContentLength > maxBody {
		return tooLarge(maxBody)
	}
	dec := json.NewDecoder(http.MaxBytesReader(baseWriter(w), r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if optional && errors.Is(err, io.EOF) {
			return nil
		}
		return decodeError(err, maxBody)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(maxBody)
		}
		return invalid("the request body has more data after the JSON object").
			WithHint("send exactly one JSON object")
	}
	return nil
}

// baseWriter unwraps w to net/http's own writer, which MaxBytesReader tells to close the
// connection after an oversized body instead of reading the rest of it.
func baseWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

func tooLarge(maxBody int64) error {
	return apiwire.WithStatus(http.StatusRequestEntityTooLarge, invalid(
		"the request body is larger than %d bytes, the server's limit", maxBody).
		WithHint("send less (large inputs as fewer, smaller files), or raise max_body_bytes in the daemon's configuration"))
}

func decodeError(err error, maxBody int64) error {
	var (
		mbe    *http.MaxBytesError
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		b64    base64.CorruptInputError
		tp     *time.ParseError
	)
	const seeSpec = "the request format is in api/openapi.yaml"
	switch {
	case errors.As(err, &mbe):
		return tooLarge(maxBody)
	case errors.Is(err, io.EOF):
		return invalid("the request body is empty").WithHint(`send a JSON object, e.g. {"code": "print(1)"}`)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("malformed JSON: the body ends in the middle of a value")
	case errors.As(err, &syntax):
		return invalid("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalid("the request body must be a JSON object, not %s", article(typ.Value)).WithHint(seeSpec)
		}
		return invalid("field %q must be %s, not %s", typ.Field, jsonType(typ.Type), article(typ.Value)).WithHint(seeSpec)
	case errors.As(err, &b64):
		return invalid("a file's content is not valid base64 (bad data at byte %d)", int64(b64)).
			WithHint("encode file contents with standard base64 (RFC 4648, with padding)")
	case errors.As(err, &tp):
		return invalid("field \"deterministic.time\" must be an RFC 3339 time like \"2024-01-02T15:04:05Z\", not %q", tp.Value)
	}
	if name, ok := unknownField(err); ok {
		return invalid("unknown field %s", name).WithHint(seeSpec)
	}
	return invalid("the request body could not be read: %v", err)
}

// unknownField recognises the decoder's unknown-field error, which has no type of its own.
func unknownField(err error) (string, bool) {
	const prefix = "json: unknown field "
	msg := err.Error()
	if len(msg) > len(prefix) && msg[:len(prefix)] == prefix {
		return msg[len(prefix):], true
	}
	return "", false
}

// jsonType names what a Go type looks like in JSON.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 time string"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return "a base64 string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// article turns the decoder's value description ("number", "number 1.5", "array") into
// readable words.
func article(v string) string {
	switch {
	case v == "":
		return "this value"
	case v == "array" || v == "object":
		return "an " + v
	case v == "bool":
		return "a boolean"
	case len(v) > 7 && v[:7] == "number ":
		return "the number " + v[7:]
	}
	return "a " + v
}
