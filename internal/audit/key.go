package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// File names in the audit directory.
const (
	RecordsFile     = "audit.jsonl"
	CheckpointsFile = "audit.checkpoints"
	KeyFile         = "signing.key"
	PubFile         = "signing.pub"
)

// keyName names the signing key in notes; it is also the checkpoints' origin line.
const keyName = "agentbox-audit"

// ensureKey loads dir's signing key, creating it (and the public key beside it) when it does not
// exist yet. The private key is written 0600 and linked into place, so a concurrent first start
// never sees half a key. It returns the signer and the verifier key text.
func ensureKey(dir string) (note.Signer, string, error) {
	path := filepath.Join(dir, KeyFile)
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			return loadKey(dir, strings.TrimSpace(string(b)))
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("audit signing key: %w", err)
		}
		skey, vkey, err := note.GenerateKey(rand.Reader, keyName)
		if err != nil {
			return nil, "", err
		}
		err = linkFile(path, skey+"\n", 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("audit signing key: %w", err)
		}
		if err := writePub(dir, vkey); err != nil {
			return nil, "", err
		}
		return loadKey(dir, skey)
	}
	return nil, "", fmt.Errorf("audit signing key %s: created and removed concurrently", path)
}

func loadKey(dir, skey string) (note.Signer, string, error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, "", fmt.Errorf("audit signing key %s: %w", filepath.Join(dir, KeyFile), err)
	}
	vkey, err := verifierKey(skey)
	if err != nil {
		return nil, "", err
	}
	// The public key is derived from the private one; write it again if it went missing.
	if b, err := os.ReadFile(filepath.Join(dir, PubFile)); err != nil || strings.TrimSpace(string(b)) != vkey {
		if err := writePub(dir, vkey); err != nil {
			return nil, "", err
		}
	}
	return s, vkey, nil
}

// verifierKey derives the public verifier key text from a private key text.
func verifierKey(skey string) (string, error) {
	// skey is PRIVATE+KEY+<name>+<hash>+<base64 of alg byte and seed>.
	parts := strings.SplitN(skey, "+", 5) // the base64 key data may hold "+"
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return "", errors.New("audit signing key: not a note private key")
	}
	pub, err := ed25519Public(parts[4])
	if err != nil {
		return "", err
	}
	return note.NewEd25519VerifierKey(parts[2], pub)
}

func writePub(dir, vkey string) error {
	path := filepath.Join(dir, PubFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(vkey+"\n"), 0o644); err != nil {
		return fmt.Errorf("audit public key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("audit public key: %w", err)
	}
	return nil
}

// linkFile writes content to a temporary file and links it to path; it fails with fs.ErrExist
// when path exists.
func linkFile(path, content string, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.WriteString(content)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Link(tmp, path)
}

// ReadPub reads a verifier key file (signing.pub).
func ReadPub(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("audit public key: %w", err)
	}
	vkey := strings.TrimSpace(string(b))
	if _, err := note.NewVerifier(vkey); err != nil {
		return "", fmt.Errorf("audit public key %s: %w", path, err)
	}
	return vkey, nil
}

// ed25519Public returns the public half of a note private key's data (an algorithm byte, 1 for
// Ed25519, and the 32-byte seed, in base64).
func ed25519Public(data string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(b) != 1+ed25519.SeedSize || b[0] != 1 {
		return nil, errors.New("audit signing key: not an Ed25519 note key")
	}
	return ed25519.NewKeyFromSeed(b[1:]).Public().(ed25519.PublicKey), nil
}
