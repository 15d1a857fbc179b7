package config_test

import (
	"os"
	"path/filepath"
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
