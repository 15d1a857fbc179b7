package apiwire

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRequestID(t *testing.T) {
	for _, tc := range []struct{ name, given, want string }{
		{"plain id kept", "abc-123_x.y", "abc-123_x.y"},
		{"newline refused", "a\nb", ""},
		{"space refused", "a b", ""},
		{"too long refused", strings.Repeat("a", 65), ""},
		{"empty made", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RequestID(tc.given, "p_")
			if tc.want != "" {
				if got != tc.want {
					t.Fatalf("RequestID(%q) = %q, want %q", tc.given, got, tc.want)
				}
				return
			}
			if !strings.HasPrefix(got, "p_") || len(got) != len("p_")+16 {
				t.Fatalf("RequestID(%q) = %q, want p_ and 16 hex digits", tc.given, got)
			}
		})
	}
}

func TestStatusWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	sw := &StatusWriter{ResponseWriter: rec}
	_, _ = sw.Write([]byte("x"))
	sw.WriteHeader(http.StatusTeapot) // too late: net/http keeps the first
	if sw.Status != http.StatusOK {
		t.Fatalf("Status = %d after a body, want 200", sw.Status)
	}
	if err := http.NewResponseController(sw).Flush(); err != nil {
		t.Fatalf("Flush through StatusWriter: %v", err)
	}
}
