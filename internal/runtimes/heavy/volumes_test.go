package heavy

import (
	"reflect"
	"testing"

	"github.com/agentbox-dev/agentbox/internal/sandbox"
)

// A session's volumes become bind mounts after the sandbox's own, read-only ones with "ro", and
// never with suid or device files.
func TestVolumeMounts(t *testing.T) {
	s := boxSpec{nproc: 10, volumes: []sandbox.Mount{
		{Volume: "a", Source: "/host/a/mnt", Path: "/mnt/a"},
		{Volume: "b", Source: "/host/b/mnt", Path: "/data", ReadOnly: true},
	}}.spec()
	n := len(s.Mounts)
	if n < 2 {
		t.Fatalf("mounts %+v", s.Mounts)
	}
	want := []ociMount{
		{Destination: "/mnt/a", Type: "bind", Source: "/host/a/mnt", Options: []string{"rbind", "nosuid", "nodev", "rw"}},
		{Destination: "/data", Type: "bind", Source: "/host/b/mnt", Options: []string{"rbind", "nosuid", "nodev", "ro"}},
	}
	if got := s.Mounts[n-2:]; !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
	if len(boxSpec{nproc: 10}.spec().Mounts) != n-2 {
		t.Errorf("a sandbox without volumes has bind mounts")
	}
}
