package cli

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// apiKeyFile is the name of the key file in the data directory. The Go client and the Python
// SDK look for it there too (and in a system install's, client.SystemDataDir).
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
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 && !serviceGroupReadable(fi) {
		k.warning = fmt.Sprintf("API key file %s can be read by other users (mode %v); run: chmod 600 %s "+
			"(or, to let the group %s use the daemon as a system install does: chgrp %s %s; chmod 640 %s)",
			path, fi.Mode().Perm(), path, serviceGroup, serviceGroup, path, path)
	}
	return k, nil
}

// serviceGroup is the group of a system install (scripts/install-system.sh): its members may read
// the daemon's key, so that their clients reach the agentbox service. Tests name another.
var serviceGroup = "agentbox"

// serviceGroupReadable reports whether the key file is a system install's: readable by its owner
// and by the group serviceGroup, writable by its owner alone, nothing for others (mode 0640 or
// tighter, group agentbox).
func serviceGroupReadable(fi os.FileInfo) bool {
	if fi.Mode().Perm()&0o037 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	g, err := user.LookupGroup(serviceGroup)
	return err == nil && g.Gid == strconv.FormatUint(uint64(st.Gid), 10)
}
