package dlp

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"strings"
)

// contentEncodings parses a Content-Encoding header into the codings in the order they were
// applied, dropping identity.
func contentEncodings(h string) []string {
	var out []string
	for _, c := range strings.Split(h, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c != "" && c != "identity" {
			out = append(out, c)
		}
	}
	return out
}

// errUnsupportedEncoding marks a Content-Encoding the scanner does not decode.
type errUnsupportedEncoding string

func (e errUnsupportedEncoding) Error() string {
	return fmt.Sprintf("Content-Encoding %q is not one the DLP decodes", string(e))
}

// decodeBody undoes the codings (last applied first), reading at most limit+1 decoded bytes so
// the caller can tell an oversize body. deflate is zlib-wrapped per RFC 9110, but raw deflate
// (which some clients send) is accepted too.
func decodeBody(b []byte, codings []string, limit int64) ([]byte, error) {
	for i := len(codings) - 1; i >= 0; i-- {
		var r io.Reader
		var err error
		switch codings[i] {
		case "gzip", "x-gzip":
			r, err = gzip.NewReader(bytes.NewReader(b))
		case "deflate":
			r, err = zlib.NewReader(bytes.NewReader(b))
			if err != nil {
				r, err = flate.NewReader(bytes.NewReader(b)), nil
			}
		default:
			return nil, errUnsupportedEncoding(codings[i])
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", codings[i], err)
		}
		out, err := io.ReadAll(io.LimitReader(r, limit+1))
		if err != nil {
			return out, fmt.Errorf("%s: %w", codings[i], err)
		}
		b = out
		if int64(len(b)) > limit {
			return b, nil
		}
	}
	return b, nil
}

// encodeBody applies the codings in order.
func encodeBody(b []byte, codings []string) ([]byte, error) {
	for _, c := range codings {
		var buf bytes.Buffer
		var w io.WriteCloser
		switch c {
		case "gzip", "x-gzip":
			w = gzip.NewWriter(&buf)
		case "deflate":
			w = zlib.NewWriter(&buf)
		default:
			return nil, errUnsupportedEncoding(c)
		}
		if _, err := w.Write(b); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		b = buf.Bytes()
	}
	return b, nil
}
