package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox-dev/agentbox/internal/config"
)

func TestAuditConfig(t *testing.T) {
	c := config.Default()
	if !c.Audit.Enabled || c.Audit.CheckpointRecords != 256 || c.Audit.CheckpointInterval.D() != 10*time.Second ||
		c.AuditDir() != filepath.Join(c.DataDir, "audit") {
		t.Fatalf("defaults: %+v, dir %s", c.Audit, c.AuditDir())
	}
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, []byte(`{"audit": {"enabled": false, "dir": "/var/log/agentbox"}}`), 0o600)
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Audit.Enabled || c.AuditDir() != "/var/log/agentbox" || c.Audit.CheckpointRecords != 256 {
		t.Errorf("from file: %+v", c.Audit)
	}
	c.Audit.CheckpointInterval = 0
	if err := c.Validate(); err == nil {
		t.Error("a zero checkpoint interval was accepted")
	}
}

// A tier's section is kept for its package to read; a section no tier has is an error, and so is
// a field the tier's section does not have.
func TestTierSections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, []byte(`{"listen": "127.0.0.1:9000", "nano": {"workers": 3}, "gpu": {"cards": 1}}`), 0o600)
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9000" {
		t.Errorf("listen %q", c.Listen)
	}
	var nano struct {
		Workers int `json:"workers"`
		Warm    int `json:"warm"`
	}
	nano.Warm = 2 // a default the file does not change
	if err := c.Tiers.Decode("nano", &nano); err != nil || nano.Workers != 3 || nano.Warm != 2 {
		t.Errorf("nano section: %+v %v", nano, err)
	}
	if err := c.Tiers.Check([]string{"nano", "heavy"}); err == nil || !strings.Contains(err.Error(), `unknown setting "gpu"`) {
		t.Errorf("unknown section: %v", err)
	}
	var strict struct{ Workers int }
	if err := (config.Sections{"nano": []byte(`{"wrokers": 1}`)}).Decode("nano", &strict); err == nil {
		t.Error("a misspelt field in a tier's section was accepted")
	}
	os.WriteFile(path, []byte(`{"limits": {"max_timeout_s": 1}}`), 0o600)
	if _, err := config.Load(path); err == nil {
		t.Error("an unknown field of a known setting was accepted")
	}
}

// The hosted MCP gateway's bounds come from the file's mcp section, with defaults for what it
// leaves out; bounds that cannot work are refused at start.
func TestMCPConfig(t *testing.T) {
	c := config.Default()
	if c.MCP.MaxSessions != 1024 || c.MCP.MaxSessionsPerKey != 64 || c.MCP.SessionIdle.D() != 30*time.Minute || c.MCP.ServerIdle.D() != 10*time.Minute {
		t.Fatalf("defaults: %+v", c.MCP)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, []byte(`{"mcp": {"max_sessions_per_key": 8, "session_idle": "5m"}}`), 0o600)
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.MCP.MaxSessionsPerKey != 8 || c.MCP.SessionIdle.D() != 5*time.Minute || c.MCP.MaxSessions != 1024 || c.MCP.ServerIdle.D() != 10*time.Minute {
		t.Errorf("from file: %+v", c.MCP)
	}
	for name, bad := range map[string]string{
		"unknown field":    `{"mcp": {"max_session": 8}}`,
		"zero total":       `{"mcp": {"max_sessions": 0}}`,
		"per key above":    `{"mcp": {"max_sessions": 10, "max_sessions_per_key": 11}}`,
		"negative idle":    `{"mcp": {"session_idle": "-1m"}}`,
		"zero server idle": `{"mcp": {"server_idle": "0s"}}`,
	} {
		os.WriteFile(path, []byte(bad), 0o600)
		if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), "mcp") && !strings.Contains(err.Error(), "max_session") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
