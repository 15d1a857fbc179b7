package heavy

import (
	"sync"

	"github.com/agentbox-dev/agentbox/internal/rootfs"
)

// moduleCache keeps each image build's module list (rootfs.Modules reads its file system), keyed
// by the build's directory: a rebuilt image is a new directory.
type moduleCache struct {
	mu   sync.Mutex
	byID map[string][]string
}

func (c *moduleCache) get(img rootfs.Image) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.byID[img.Dir]; ok {
		return m
	}
	m, err := img.Modules()
	if err != nil {
		m = nil // an image whose files cannot be read offers nothing to look up; asked again next time
	} else {
		if c.byID == nil {
			c.byID = map[string][]string{}
		}
		c.byID[img.Dir] = m
	}
	return m
}
