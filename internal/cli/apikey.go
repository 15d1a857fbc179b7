package cli

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// apiKeyFile is the name of the key file in the data directory. The Go client and the Python
// SDK look for it there too.
const apiKeyFile = "api_key"

// apiKey is where the daemon's key came from.
type apiKey struct {
	key string
	// path is the key file, or "" when the key came from the environment.
	path    string
	created bool
	// warning, when not empty, says that the file is readable by others.
	warning string
}

// ensureAPIKey returns envKey when it is set, else the key in dir/api_key, which it creates
// (mode 0600, in a directory created 0700) when missing. A key file made by a concurrent start
// is read, not overwritten.
func ensureAPIKey(envKey, dir string) (apiKey, error) {
	if envKey != "" {
		return apiKey{key: envKey}, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return apiKey{}, fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(dir, apiKeyFile)
	for range 2 {
		k, err := readAPIKey(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return k, err
		}
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return apiKey{}, err
		}
		key := "abk_" + base64.RawURLEncoding.EncodeToString(b[:])
		// Write the key to a private temporary file, then link it into place: the link fails if
		// another start got there first, and nobody ever sees a half-written key file.
		f, err := os.CreateTemp(filepath.Dir(path), ".api_key-")
		if err != nil {
			return apiKey{}, fmt.Errorf("API key file: %w", err)
		}
		tmp := f.Name()
		_, err = f.WriteString(key + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Link(tmp, path)
		}
		os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			continue // another start made it first: use theirs
		}
		if err != nil {
			return apiKey{}, fmt.Errorf("API key file: %w", err)
		}
		return apiKey{key: key, path: path, created: true}, nil
	}
	return apiKey{}, fmt.Errorf("API key file %s: created and removed concurrently", path)
}

func readAPIKey(path string) (apiKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return apiKey{}, err
	}
	k := apiKey{key: strings.TrimSpace(string(b)), path: path}
	if k.key == "" {
		return apiKey{}, fmt.Errorf("API key file %s is empty; delete it and start again to make a new key", path)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		k.warning = fmt.Sprintf("API key file %s can be read by other users (mode %v); run: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	return k, nil
}
