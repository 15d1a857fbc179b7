package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/cli"
	"github.com/agentbox-dev/agentbox/internal/jail"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano"
	"github.com/agentbox-dev/agentbox/internal/runtimes/nano/worker"
	"github.com/agentbox-dev/agentbox/internal/s3/s3test"
	"github.com/agentbox-dev/agentbox/internal/testenv"
)

// The system install (scripts/install-system.sh, scripts/agentbox.service): its unit, the files
// it installs, and a member of the group agentbox reaching the daemon with nothing configured.
// systemd does not run the test machines (no systemd as PID 1), so the unit is checked with
// systemd-analyze verify and the daemon is started by the test.

// asCLI makes the test binary act as the agentbox command, so that the install script has a
// binary to install and other users something to run, without a separate build.
const asCLI = "AGENTBOX_TEST_AS_CLI"

func TestMain(m *testing.M) {
	// The nodes the cluster tests start are this binary too: their nano workers start as it.
	jail.MaybeInit()
	if len(os.Args) > 1 && os.Args[1] == nano.WorkerArg {
		os.Exit(worker.Main(os.Args[2:]))
	}
	if os.Getenv(asCLI) == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	code := m.Run()
	s3test.Stop() // the S3-compatible server of the cluster tests over S3, if one started
	os.Exit(code)
}

const serviceGroup = "agentbox"

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// The unit runs `agentbox serve` as root from the system configuration, and systemd finds nothing
// wrong with it.
func TestSystemUnit(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "scripts", "agentbox.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"\nExecStart=/usr/local/bin/agentbox serve --config /etc/agentbox/config.json\n",
		"\nEnvironment=AGENTBOX_DATA_DIR=/var/lib/agentbox\n",
		"\nKillMode=mixed\n",
		"\nWantedBy=multi-user.target\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	// Root: the jail and gVisor need it. (StateDirectory= would chmod the data directory at every
	// start, undoing the group's access to the key.)
	for _, bad := range []string{"\nUser=", "\nDynamicUser=", "\nStateDirectory="} {
		if strings.Contains(unit, bad) {
			t.Errorf("the unit has %s", strings.TrimSpace(bad))
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (apt-get install systemd): the unit is not verified")
	}
	// verify wants ExecStart's program to exist: point it at this binary.
	dir := t.TempDir()
	path := filepath.Join(dir, "agentbox.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/local/bin/agentbox", testBinary(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// needGroup makes sure the test may create the group agentbox (the script does), and removes it
// afterwards if it was not there before.
func needGroup(t *testing.T) {
	t.Helper()
	if _, err := user.LookupGroup(serviceGroup); err != nil {
		t.Cleanup(func() {
			if out, err := exec.Command("groupdel", serviceGroup).CombinedOutput(); err != nil {
				t.Logf("groupdel %s: %v %s", serviceGroup, err, out)
			}
		})
	}
}

// installSystem runs the install script into destdir, installing this test binary.
func installSystem(t *testing.T, destdir string, env ...string) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(repoRoot(t), "scripts", "install-system.sh"))
	cmd.Env = append(os.Environ(), append([]string{"DESTDIR=" + destdir, "AGENTBOX_BIN=" + testBinary(t)}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install-system.sh: %v\n%s", err, out)
	}
	return string(out)
}

// owned checks a file's type and mode, owner root and group.
func owned(t *testing.T, path string, mode os.FileMode, gid int) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&(os.ModeType|os.ModePerm) != mode || st.Uid != 0 || int(st.Gid) != gid {
		t.Errorf("%s: mode %v owner %d:%d, want %v 0:%d", path, fi.Mode(), st.Uid, st.Gid, mode, gid)
	}
	return fi
}

func groupID(t *testing.T) int {
	t.Helper()
	g, err := user.LookupGroup(serviceGroup)
	if err != nil {
		t.Fatalf("the group %s: %v", serviceGroup, err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	return gid
}

// The script installs the binary, the configuration, the data directory with the key readable by
// the group agentbox, and the unit; run again, it keeps the configuration and the key and puts
// modes back.
func TestInstallSystem(t *testing.T) {
	testenv.RequireRoot(t)
	needGroup(t)
	dest := t.TempDir()
	out := installSystem(t, dest)
	if !strings.Contains(out, "staged under "+dest) {
		t.Errorf("output:\n%s", out)
	}
	gid := groupID(t)
	owned(t, filepath.Join(dest, "usr/local/bin/agentbox"), 0o755, 0)
	owned(t, filepath.Join(dest, "etc/agentbox/config.json"), 0o644, 0)
	owned(t, filepath.Join(dest, "etc/systemd/system/agentbox.service"), 0o644, 0)
	owned(t, filepath.Join(dest, "var/lib/agentbox"), os.ModeDir|0o710, gid)
	owned(t, filepath.Join(dest, "var/lib/agentbox/api_key"), 0o640, gid)
	conf, _ := os.ReadFile(filepath.Join(dest, "etc/agentbox/config.json"))
	if !strings.Contains(string(conf), `"data_dir": "/var/lib/agentbox"`) {
		t.Errorf("config.json: %s", conf)
	}
	key, _ := os.ReadFile(filepath.Join(dest, "var/lib/agentbox/api_key"))
	if !regexp.MustCompile(`^abk_[A-Za-z0-9_-]{43}\n$`).Match(key) {
		t.Errorf("api_key %q is not a key as the daemon makes them", key)
	}
	if ents, _ := os.ReadDir(filepath.Join(dest, "var/lib/agentbox")); len(ents) != 1 {
		t.Errorf("the data directory holds %v, want api_key alone", ents)
	}
	unit, _ := os.ReadFile(filepath.Join(dest, "etc/systemd/system/agentbox.service"))
	src, _ := os.ReadFile(filepath.Join(repoRoot(t), "scripts/agentbox.service"))
	if !bytes.Equal(unit, src) {
		t.Error("the installed unit differs from scripts/agentbox.service with the default prefix")
	}
	// The installed binary is this test's, acting as agentbox.
	cmd := exec.Command(filepath.Join(dest, "usr/local/bin/agentbox"), "version")
	cmd.Env = append(os.Environ(), asCLI+"=1")
	if b, err := cmd.Output(); err != nil || !strings.HasPrefix(string(b), "agentbox ") {
		t.Errorf("the installed binary: %q %v", b, err)
	}

	// Again, after the administrator edited the configuration and modes drifted.
	edited := []byte(`{"data_dir": "/var/lib/agentbox", "listen": "127.0.0.1:8421"}` + "\n")
	if err := os.WriteFile(filepath.Join(dest, "etc/agentbox/config.json"), edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dest, "var/lib/agentbox/api_key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dest, "var/lib/agentbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	out = installSystem(t, dest)
	if !strings.Contains(out, "kept /etc/agentbox/config.json") {
		t.Errorf("second run's output:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "etc/agentbox/config.json")); !bytes.Equal(b, edited) {
		t.Errorf("the configuration was rewritten: %s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "var/lib/agentbox/api_key")); !bytes.Equal(b, key) {
		t.Error("the key changed")
	}
	owned(t, filepath.Join(dest, "var/lib/agentbox"), os.ModeDir|0o710, gid)
	owned(t, filepath.Join(dest, "var/lib/agentbox/api_key"), 0o640, gid)

	// Another prefix: the binary goes there and the unit names it.
	dest2 := t.TempDir()
	installSystem(t, dest2, "PREFIX=/opt/agentbox")
	owned(t, filepath.Join(dest2, "opt/agentbox/bin/agentbox"), 0o755, 0)
	unit, _ = os.ReadFile(filepath.Join(dest2, "etc/systemd/system/agentbox.service"))
	if !strings.Contains(string(unit), "\nExecStart=/opt/agentbox/bin/agentbox serve --config /etc/agentbox/config.json\n") {
		t.Errorf("the unit with PREFIX=/opt/agentbox:\n%s", unit)
	}
}

// testUser creates a system user for the test (in group agentbox when member), removed after.
func testUser(t *testing.T, name string, member bool) (uid, gid int) {
	t.Helper()
	args := []string{"--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin"}
	if member {
		args = append(args, "--groups", serviceGroup)
	}
	if out, err := exec.Command("useradd", append(args, name)...).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Logf("userdel %s: %v %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// openUp makes dir and its parents up to /tmp traversable by everyone (t.TempDir's are 0700).
func openUp(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A user of the group agentbox, with no key and no configuration of their own, reaches the
// system's daemon with the CLI and the Python SDK: they find /var/lib/agentbox/api_key (the
// install's data directory, mounted there for them) and the daemon, which does not warn about the
// key's mode, accepts it. A user outside the group can read neither the key nor use the daemon.
func TestSystemGroupMemberReachesDaemon(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"useradd", "userdel", "groupdel", "setpriv", "unshare", "mount"} {
		testenv.RequireTool(t, tool)
	}
	needGroup(t)
	dest := t.TempDir()
	installSystem(t, dest)
	openUp(t, dest)
	data := filepath.Join(dest, "var/lib/agentbox")
	bin := filepath.Join(dest, "usr/local/bin/agentbox")
	home := filepath.Join(dest, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// The Python SDK, where the users can read it.
	sdk := filepath.Join(dest, "sdk")
	if err := os.Mkdir(sdk, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(repoRoot(t), "sdk/python/agentbox"), sdk).CombinedOutput(); err != nil {
		t.Fatalf("copying the SDK: %v %s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "a+rX", sdk).CombinedOutput(); err != nil {
		t.Fatalf("chmod the SDK: %v %s", err, out)
	}

	suffix := strconv.Itoa(os.Getpid() % 100000)
	memberUID, memberGID := testUser(t, "abtest-member-"+suffix, true)
	outsiderUID, outsiderGID := testUser(t, "abtest-outsider-"+suffix, false)

	// as runs argv as the user uid in a mount namespace where /var/lib/agentbox is the install's
	// data directory, with an empty environment but for env.
	as := func(uid, gid int, stdin string, env []string, argv ...string) (string, int) {
		t.Helper()
		script := `mount -t tmpfs tmpfs /var/lib && mkdir /var/lib/agentbox && mount --bind "$0" /var/lib/agentbox && exec "$@"`
		args := append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", script, data,
			"setpriv", "--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--init-groups", "--",
			"env", "-i", "HOME=" + home, "PATH=/usr/bin:/bin"}, env...)
		cmd := exec.Command("unshare", append(args, argv...)...)
		cmd.Stdin = strings.NewReader(stdin)
		b, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", argv, err)
		}
		return string(b), code
	}

	stderr := serve(t, data, func(url string) {
		env := []string{"AGENTBOX_URL=" + url, asCLI + "=1"}
		// The key itself: the member reads it, the outsider cannot even reach it.
		key, _ := os.ReadFile(filepath.Join(data, "api_key"))
		if out, code := as(memberUID, memberGID, "", nil, "cat", "/var/lib/agentbox/api_key"); code != 0 || out != string(key) {
			t.Errorf("the member reads the key: %d %q", code, out)
		}
		if out, code := as(outsiderUID, outsiderGID, "", nil, "cat", "/var/lib/agentbox/api_key"); code == 0 || !strings.Contains(out, "Permission denied") {
			t.Errorf("the outsider reads the key: %d %q", code, out)
		}
		// The CLI: agentbox run through the daemon, with the key it found.
		if out, code := as(memberUID, memberGID, "print(6*7)", env, bin, "run", "-"); code != 0 || !strings.Contains(out, "ran: print(6*7)") {
			t.Errorf("the member's agentbox run: exit %d\n%s", code, out)
		}
		if out, code := as(outsiderUID, outsiderGID, "print(6*7)", env, bin, "run", "-"); code != 77 || !strings.Contains(out, "unauthorized") {
			t.Errorf("the outsider's agentbox run: exit %d, want 77 (unauthorized)\n%s", code, out)
		}
		// The Python SDK (Debian's python3: another user cannot reach root's pyenv).
		py := "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			t.Logf("no %s: the Python SDK is not tried", py)
			return
		}
		prog := fmt.Sprintf(`import agentbox; c = agentbox.Client(%q); print("sessions", c.list_sessions())`, url)
		pyEnv := []string{"PYTHONPATH=" + sdk, "PYTHONDONTWRITEBYTECODE=1"}
		if out, code := as(memberUID, memberGID, "", pyEnv, py, "-c", prog); code != 0 || !strings.Contains(out, "sessions []") {
			t.Errorf("the member's Python SDK: exit %d\n%s", code, out)
		}
		if out, code := as(outsiderUID, outsiderGID, "", pyEnv, py, "-c", prog); code == 0 || !strings.Contains(out, "Unauthorized") {
			t.Errorf("the outsider's Python SDK: exit %d\n%s", code, out)
		}
	})
	if strings.Contains(stderr, "can be read by other users") {
		t.Errorf("the daemon warns about the install's key file:\n%s", stderr)
	}
	if !strings.Contains(stderr, "API key in "+filepath.Join(data, "api_key")) {
		t.Errorf("the daemon did not use the install's key:\n%s", stderr)
	}
}
