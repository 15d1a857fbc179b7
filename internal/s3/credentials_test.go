package s3

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCredentials(t *testing.T) {
	p := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(p, []byte("# a comment\n[other]\naws_access_key_id = X\naws_secret_access_key = Y\n\n[default]\naws_access_key_id = AK\naws_secret_access_key = SK\naws_session_token = TOK\n"), 0o600)
	a, s, tok, err := Credentials(p)
	if err != nil || a != "AK" || s != "SK" || tok != "TOK" {
		t.Fatalf("%q %q %q %v", a, s, tok, err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "EA")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "ES")
	t.Setenv("AWS_SESSION_TOKEN", "")
	if a, s, _, err := Credentials(""); err != nil || a != "EA" || s != "ES" {
		t.Fatalf("from the environment: %q %q %v", a, s, err)
	}
	os.WriteFile(p, []byte("[default]\naws_access_key_id = AK\n"), 0o600)
	if _, _, _, err := Credentials(p); err == nil {
		t.Fatal("a file without a secret was taken")
	}
}
