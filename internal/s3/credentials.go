package s3

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Credentials reads an access key, a secret key and an optional session token from file (an
// AWS shared-credentials file: its [default] profile, or the only one it has), or, when file is
// empty, from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN).
func Credentials(file string) (access, secret, token string, err error) {
	if file == "" {
		access, secret, token = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN")
		if access == "" || secret == "" {
			return "", "", "", fmt.Errorf("s3: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a credentials file")
		}
		return access, secret, token, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", "", "", fmt.Errorf("s3: credentials: %w", err)
	}
	defer f.Close()
	profiles := map[string]map[string]string{}
	section := "default"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.TrimSpace(strings.TrimPrefix(strings.Trim(line, "[]"), "profile "))
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			if profiles[section] == nil {
				profiles[section] = map[string]string{}
			}
			profiles[section][strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", "", fmt.Errorf("s3: credentials %s: %w", file, err)
	}
	p := profiles["default"]
	if p == nil && len(profiles) == 1 {
		for _, only := range profiles {
			p = only
		}
	}
	if p["aws_access_key_id"] == "" || p["aws_secret_access_key"] == "" {
		return "", "", "", fmt.Errorf("s3: credentials file %s has no [default] aws_access_key_id and aws_secret_access_key", file)
	}
	return p["aws_access_key_id"], p["aws_secret_access_key"], p["aws_session_token"], nil
}
