package nomad

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/agentbox-dev/agentbox/internal/cluster"
)

// Kind is the `nomad:SERVICE` discovery kind. Its goroutine ends when the context given to
// cluster.Open is done.
var Kind = cluster.Kind{Name: "nomad", Open: func(ctx context.Context, arg string, log *slog.Logger) (cluster.Discovery, error) {
	return New(ctx, Options{Service: arg, Log: log})
}}

// Tags a node's registration may carry (the job file's service block).
const (
	// TagNodeID names the node's agentbox id ("agentbox-node=n1"), for a registration whose
	// Nomad node id is not the agentbox id (a service job, say).
	TagNodeID = "agentbox-node="
	// TagHTTPS says the node serves HTTPS.
	TagHTTPS = "agentbox-https"
)

// Options configure a Discovery. Zero values take the defaults named.
type Options struct {
	// Service is the Nomad service the nodes register (required), e.g. "agentbox-node".
	Service string
	// Client talks to Nomad. Default: api.NewClient(api.DefaultConfig()), which reads NOMAD_ADDR,
	// NOMAD_TOKEN, NOMAD_NAMESPACE, NOMAD_REGION and the TLS variables.
	Client *api.Client
	// Interval is how often the list is read again in the background. Default 500 ms, so a list
	// is at most about a second stale, as cluster.Discovery promises.
	Interval time.Duration
	// StaleOnError is how long the last list read is still given out while Nomad cannot be
	// reached (a leader election, a restarting server), instead of an error. Default 10 s: the
	// gateway checks the nodes itself too, and a list a few seconds old beats none.
	StaleOnError time.Duration
	// Timeout bounds one read of the list (the service and each allocation's checks). Default 2 s.
	Timeout time.Duration
	Log     *slog.Logger
}

// Discovery lists the registrations of one Nomad service as agentbox nodes.
type Discovery struct {
	o      Options
	client *api.Client

	mu      sync.Mutex
	nodes   []cluster.Node
	read    time.Time // when nodes was read
	err     error     // the last read's error, nil after a good one
	reading chan struct{}

	// checked is each listed allocation's health as last read from its checks, for a read
	// that Nomad does not answer in time (a loaded server is not a sick node). Only the list
	// reader touches it.
	checked map[string]bool
}

// Interface guards.
var _ cluster.Discovery = (*Discovery)(nil)

// New makes the Discovery and starts reading the list every Interval until ctx is done. It does
// not wait for Nomad: a first Nodes call reads the list if the background has not yet.
func New(ctx context.Context, o Options) (*Discovery, error) {
	if o.Service == "" {
		return nil, errors.New("name the Nomad service the nodes register: nomad:SERVICE, e.g. nomad:agentbox-node")
	}
	if strings.ContainsAny(o.Service, "/ ") {
		return nil, fmt.Errorf("service %q: a Nomad service name has no '/' or space (the namespace comes from NOMAD_NAMESPACE)", o.Service)
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.StaleOnError <= 0 {
		o.StaleOnError = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	d := &Discovery{o: o, client: o.Client}
	if d.client == nil {
		c, err := api.NewClient(api.DefaultConfig())
		if err != nil {
			return nil, fmt.Errorf("nomad client: %w", err)
		}
		d.client = c
	}
	go d.loop(ctx)
	return d, nil
}

func (d *Discovery) loop(ctx context.Context) {
	t := time.NewTicker(d.o.Interval)
	defer t.Stop()
	for {
		d.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Nodes returns the nodes of the last read, reading the list first when it is older than twice
// the interval (the background is behind or has not read yet). While Nomad cannot be reached it
// gives out the last good list for up to StaleOnError, then the error.
func (d *Discovery) Nodes(ctx context.Context) ([]cluster.Node, error) {
	d.mu.Lock()
	fresh := !d.read.IsZero() && time.Since(d.read) <= 2*d.o.Interval
	d.mu.Unlock()
	if !fresh {
		d.refresh(ctx)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read.IsZero() || (d.err != nil && time.Since(d.read) > d.o.StaleOnError) {
		if d.err == nil {
			return nil, ctx.Err()
		}
		return nil, d.err
	}
	return slices.Clone(d.nodes), nil
}

// refresh reads the list once; concurrent callers wait for the read under way instead of
// starting their own.
func (d *Discovery) refresh(ctx context.Context) {
	d.mu.Lock()
	if ch := d.reading; ch != nil {
		d.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return
	}
	ch := make(chan struct{})
	d.reading = ch
	d.mu.Unlock()

	nodes, err := d.list(ctx)

	d.mu.Lock()
	d.reading = nil
	if err != nil {
		if d.err == nil {
			d.o.Log.Warn("nomad discovery: cannot read the service", "service", d.o.Service, "err", err)
		}
		d.err = err
	} else {
		if d.err != nil {
			d.o.Log.Info("nomad discovery: reading the service again", "service", d.o.Service, "nodes", len(nodes))
		}
		d.nodes, d.read, d.err = nodes, time.Now(), nil
	}
	d.mu.Unlock()
	close(ch)
}

// list reads the service's registrations and the checks of their allocations.
func (d *Discovery) list(ctx context.Context) ([]cluster.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	regs, _, err := d.client.Services().Get(d.o.Service, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("nomad service %s: %w", d.o.Service, err)
	}
	healthy := make([]bool, len(regs))
	known := make([]bool, len(regs))
	var wg sync.WaitGroup
	for i, r := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			healthy[i], known[i] = d.checksPass(ctx, r)
		}()
	}
	wg.Wait()
	checked := make(map[string]bool, len(regs))
	for i, r := range regs {
		if !known[i] {
			healthy[i] = d.checked[r.AllocID] // unknown before: unhealthy
		}
		checked[r.AllocID] = healthy[i]
	}
	d.checked = checked
	byID := map[string]int{}
	var nodes []cluster.Node
	var created []uint64
	for i, r := range regs {
		n, err := nodeOf(r)
		if err != nil {
			d.o.Log.Warn("nomad discovery: registration skipped", "service", d.o.Service, "alloc", r.AllocID, "err", err)
			continue
		}
		n.Healthy = healthy[i]
		// Two registrations for one node (an allocation replacing another): keep the healthy
		// one, else the newer.
		if j, ok := byID[n.ID]; ok {
			if nodes[j].Healthy && !n.Healthy || nodes[j].Healthy == n.Healthy && created[j] > r.CreateIndex {
				continue
			}
			nodes[j], created[j] = n, r.CreateIndex
			continue
		}
		byID[n.ID] = len(nodes)
		nodes = append(nodes, n)
		created = append(created, r.CreateIndex)
	}
	slices.SortFunc(nodes, func(a, b cluster.Node) int { return strings.Compare(a.ID, b.ID) })
	return nodes, nil
}

// checksPass says whether every Nomad check of the registration's service in its allocation
// passes. When Nomad answers that it cannot read them (the allocation's client is down or cut
// off: "No path to node"), the node is unhealthy; when Nomad does not answer in time, known is
// false and the caller keeps what it knew. A service without checks is healthy while Nomad lists
// it (its task runs).
func (d *Discovery) checksPass(ctx context.Context, r *api.ServiceRegistration) (healthy, known bool) {
	checks, err := d.client.Allocations().Checks(r.AllocID, (&api.QueryOptions{Namespace: r.Namespace}).WithContext(ctx))
	if err != nil {
		var answered api.UnexpectedResponseError
		known = errors.As(err, &answered) && answered.HasStatusCode()
		d.o.Log.Debug("nomad discovery: checks unreadable", "alloc", r.AllocID, "answered", known, "err", err)
		return false, known
	}
	for _, c := range checks {
		if c.Service == r.ServiceName && c.Status != "success" {
			return false, true
		}
	}
	return true, true
}

// nodeOf turns a registration into a node: its id (the tag, else the Nomad node id without
// dashes) and its base URL.
func nodeOf(r *api.ServiceRegistration) (cluster.Node, error) {
	id := strings.ToLower(strings.ReplaceAll(r.NodeID, "-", ""))
	scheme := "http"
	for _, t := range r.Tags {
		if v, ok := strings.CutPrefix(t, TagNodeID); ok {
			id = v
		}
		if t == TagHTTPS {
			scheme = "https"
		}
	}
	if err := cluster.ValidNodeID(id); err != nil {
		return cluster.Node{}, err
	}
	if r.Address == "" || r.Port <= 0 {
		return cluster.Node{}, fmt.Errorf("node %s: registration has no address and port", id)
	}
	return cluster.Node{
		ID:     id,
		Addr:   scheme + "://" + net.JoinHostPort(r.Address, strconv.Itoa(r.Port)),
		Source: "nomad",
	}, nil
}
