package s3local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox-dev/agentbox/internal/freeport"
	"github.com/agentbox-dev/agentbox/internal/s3"
)

// Server is a running S3-compatible server.
type Server struct {
	// Endpoint is its base URL (http://127.0.0.1:PORT); AccessKey and SecretKey an identity
	// allowed everything.
	Endpoint             string
	AccessKey, SecretKey string
	cmd                  *exec.Cmd
	log                  *lockedBuffer
	dir                  string
	exited               chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		l.b.Reset()
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Log is what the server printed (its last MiB).
func (s *Server) Log() string { return s.log.String() }

// Config is a client configuration for bucket and prefix on the server (path-style).
func (s *Server) Config(bucket, prefix string) s3.Config {
	return s3.Config{Endpoint: s.Endpoint, Region: "us-east-1", Bucket: bucket, Prefix: prefix, PathStyle: true,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey}
}

// NewBucket makes a bucket of a fresh name and returns a client of it under prefix.
func (s *Server) NewBucket(ctx context.Context, prefix string) (*s3.Client, error) {
	var n [4]byte
	_, _ = rand.Read(n[:])
	c, err := s3.New(s.Config("t"+hex.EncodeToString(n[:]), prefix))
	if err != nil {
		return nil, err
	}
	if err := c.CreateBucket(ctx); err != nil {
		return nil, fmt.Errorf("creating a bucket: %w", err)
	}
	return c, nil
}

// Find returns the weed binary scripts/cluster/seaweedfs-build.sh cached under dataDir, if one
// is there.
func Find(dataDir string) (string, bool) {
	ms, _ := filepath.Glob(filepath.Join(dataDir, "tools", "seaweedfs", "*", "weed.ok"))
	sort.Strings(ms)
	for i := len(ms) - 1; i >= 0; i-- {
		p := ms[i][:len(ms[i])-len(".ok")]
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// Start runs weed (the binary's path) until Stop, keeping its data in a temporary directory
// Stop removes. It returns once the server answers a signed request.
func Start(weed string) (*Server, error) {
	dir, err := os.MkdirTemp("", "agentbox-s3test-")
	if err != nil {
		return nil, err
	}
	var k [12]byte
	_, _ = rand.Read(k[:])
	s := &Server{AccessKey: "agentbox-test", SecretKey: hex.EncodeToString(k[:]), log: &lockedBuffer{}, dir: dir}
	conf, _ := json.Marshal(map[string]any{"identities": []any{map[string]any{
		"name":        "agentbox",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}})
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), conf, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// Below the ephemeral range: weed's own servers connect to each other while it starts, and an
	// outgoing connection could take a port from port 0 before the server meant for it binds.
	p, err := freeport.Loopback(8)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(p[6])
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	args := []string{"mini", "-dir=" + data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port=" + strconv.Itoa(p[0]), "-master.port.grpc=" + strconv.Itoa(p[1]),
		"-volume.port=" + strconv.Itoa(p[2]), "-volume.port.grpc=" + strconv.Itoa(p[3]),
		"-filer.port=" + strconv.Itoa(p[4]), "-filer.port.grpc=" + strconv.Itoa(p[5]),
		"-s3.port=" + strconv.Itoa(p[6]), "-s3.port.grpc=" + strconv.Itoa(p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
		"-master.telemetry=false", "-s3.config=" + filepath.Join(dir, "s3.json"),
		// Volumes of 1 GiB (mini's most; sparse on disk) rather than 128 MiB: SeaweedFS grows a
		// new volume when one fills, which stalls the write that finds it full for a second or
		// so, and heavy checkpoints (tens of MB each) would fill small ones every few steps.
		"-master.volumeSizeLimitMB=1024",
		// A fixed number of volumes. With none given, SeaweedFS allows free disk space ÷ volume
		// size, and each bucket (a collection of its own) takes volumes as it is first written:
		// with 11 GB free the shared store's tests had used them all by their last bucket, whose
		// first write was a 500 InternalError. Volumes are sparse files, so the count costs no
		// disk until written.
		"-volume.max=256",
		"-filer.localSocket=" + filepath.Join(dir, "filer.sock"), "-s3.localSocket=" + filepath.Join(dir, "s3.sock"),
	}
	cmd := exec.Command(weed, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("s3local: starting %s: %w", weed, err)
	}
	s.cmd = cmd
	exited := make(chan error, 1)
	s.exited = exited
	go func() { exited <- cmd.Wait(); close(exited) }()
	// Ready when an authenticated listing answers (the identities are loaded).
	c, err := s3.New(s.Config("ready", ""))
	if err != nil {
		s.Stop()
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.CreateBucket(ctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("s3local: weed mini exited (%v):\n%s", werr, s.log)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("s3local: weed mini did not answer in 2 minutes (%v):\n%s", err, s.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return s, nil
}

// Stop ends the server and removes its data.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
		}
	}
	os.RemoveAll(s.dir)
}
