package heavy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentbox-dev/agentbox/internal/rootfs"
	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// The OCI runtime spec, only the parts a heavy sandbox uses (runtime-spec v1.0).
type ociSpec struct {
	OCIVersion string     `json:"ociVersion"`
	Process    ociProcess `json:"process"`
	Root       ociRoot    `json:"root"`
	Hostname   string     `json:"hostname"`
	Mounts     []ociMount `json:"mounts"`
	Linux      ociLinux   `json:"linux"`
	// Annotations carry gVisor's own settings (dev.gvisor.*): the EROFS root.
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociProcess struct {
	Terminal        bool                `json:"terminal"`
	User            ociUser             `json:"user"`
	Args            []string            `json:"args"`
	Env             []string            `json:"env"`
	Cwd             string              `json:"cwd"`
	Capabilities    map[string][]string `json:"capabilities"`
	Rlimits         []ociRlimit         `json:"rlimits"`
	NoNewPrivileges bool                `json:"noNewPrivileges"`
}

type ociUser struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

type ociRlimit struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

type ociRoot struct {
	Path     string `json:"path"`
	Readonly bool   `json:"readonly"`
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type ociLinux struct {
	Namespaces  []ociNamespace `json:"namespaces"`
	Resources   ociResources   `json:"resources"`
	CgroupsPath string         `json:"cgroupsPath"`
}

type ociNamespace struct {
	Type string `json:"type"`
}

type ociResources struct {
	Memory *ociMemory `json:"memory,omitempty"`
	Pids   *ociPids   `json:"pids,omitempty"`
	CPU    *ociCPU    `json:"cpu,omitempty"`
}

type ociMemory struct {
	Limit int64 `json:"limit"`
}

type ociPids struct {
	Limit int64 `json:"limit"`
}

type ociCPU struct {
	Quota  int64  `json:"quota"`
	Period uint64 `json:"period"`
}

// agentCaps are the capabilities of the guest agent (root inside the sandbox): enough to start
// Python as the unprivileged user, signal it and own the files it is given. The Python process
// has none (a uid change drops them).
var agentCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL", "CAP_SETGID", "CAP_SETUID"}

// boxSpec is what a sandbox is made of.
type boxSpec struct {
	img         rootfs.Image
	memoryBytes int64 // the cgroup limit: code + overlay + runtime
	filesBytes  int64 // the size of each writable file system: the root overlay and /tmp
	nproc       int   // RLIMIT_NPROC of the sandbox's processes
	cpuQuota    int64 // microseconds per 100ms period; 0: none
	cgroupsPath string
	// volumes are bound into the sandbox (volumes.go).
	volumes []sandbox.Mount
	// erofs is the image's root as an EROFS file (rootfs.Image.Erofs), or "": the root is then
	// the image's directory, served by a gofer process.
	erofs string
	// shareTemplate asks for the template's pages shared (shareTemplatePagesAnnotation): a
	// restore from the template with heavy.share_template_pages.
	shareTemplate bool
}

func (b boxSpec) spec() ociSpec {
	caps := map[string][]string{"bounding": agentCaps, "effective": agentCaps, "permitted": agentCaps}
	s := ociSpec{
		OCIVersion: "1.0.0",
		Process: ociProcess{
			Args:         []string{rootfs.GuestPath},
			Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cwd:          "/",
			Capabilities: caps,
			Rlimits: []ociRlimit{
				{Type: "RLIMIT_NPROC", Hard: uint64(b.nproc), Soft: uint64(b.nproc)},
				{Type: "RLIMIT_NOFILE", Hard: 4096, Soft: 4096},
			},
			NoNewPrivileges: true,
		},
		Root:     ociRoot{Path: b.img.Rootfs(), Readonly: false},
		Hostname: "sandbox",
		Mounts: []ociMount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "mode=755"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"ro", "nosuid", "noexec", "nodev"}},
			// Explicit, so gVisor does not mount an unbounded tmpfs of its own over an empty /tmp.
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=" + strconv.FormatInt(b.filesBytes, 10)}},
		},
		Linux: ociLinux{
			Namespaces: []ociNamespace{{"pid"}, {"network"}, {"ipc"}, {"uts"}, {"mount"}},
			Resources: ociResources{
				Memory: &ociMemory{Limit: b.memoryBytes},
				Pids:   &ociPids{Limit: pidsLimit(b.nproc)},
			},
			CgroupsPath: b.cgroupsPath,
		},
	}
	s.Mounts = append(s.Mounts, volumeMounts(b.volumes)...)
	if b.cpuQuota > 0 {
		s.Linux.Resources.CPU = &ociCPU{Quota: b.cpuQuota, Period: 100000}
	}
	if b.erofs != "" {
		// gVisor mounts the EROFS file as the root, itself, with the same memory overlay of the
		// files limit's size as --overlay2 gives the directory: no gofer process is needed.
		s.Annotations = map[string]string{
			"dev.gvisor.spec.rootfs.source":  b.erofs,
			"dev.gvisor.spec.rootfs.type":    "erofs",
			"dev.gvisor.spec.rootfs.overlay": "memory",
			"dev.gvisor.spec.rootfs.options": "size=" + strconv.FormatInt(b.filesBytes, 10),
		}
	}
	if b.shareTemplate {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[shareTemplatePagesAnnotation] = "true"
	}
	return s
}

// pidsLimit is the host pids cgroup limit: a backstop above RLIMIT_NPROC, since the cgroup also
// counts the runtime's own threads and at its limit the runtime fails as a whole (notes/gvisor.md).
func pidsLimit(nproc int) int64 { return int64(2*nproc + 256) }

func writeSpec(dir string, s ociSpec) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// shareTemplatePagesAnnotation asks our runsc (scripts/gvisor-patch, pkg/sentry/mm/template.go)
// to keep a restore's private memory in the checkpoint's pages file, shared copy-on-write by every
// sandbox restored from it. The pages file must not change while such a sandbox runs: a template's
// image is written once (into a new directory, renamed in) and only ever removed.
const shareTemplatePagesAnnotation = "dev.agentbox.share-template-pages"
