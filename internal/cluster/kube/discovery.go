package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/agentbox-dev/agentbox/internal/cluster"
)

// Kind is the discovery kind "kube:NAMESPACE/SERVICE[:PORT]", listed in the daemon's wiring.
var Kind = cluster.Kind{Name: "kube", Open: open}

// SyncTimeout bounds how long Open waits for the first list of EndpointSlices: a gateway that
// cannot read them does not start (its pod restarts and says why) instead of serving without
// nodes.
const SyncTimeout = 30 * time.Second

// Spec is what a kube: spec names.
type Spec struct {
	Namespace, Service string
	// Port is the Service port's name or number; "" takes the port named "http", else the first.
	Port string
}

// ParseSpec reads NAMESPACE/SERVICE[:PORT].
func ParseSpec(arg string) (Spec, error) {
	ns, rest, ok := strings.Cut(arg, "/")
	if !ok || ns == "" || rest == "" {
		return Spec{}, fmt.Errorf("%q: write NAMESPACE/SERVICE[:PORT], e.g. kube:agentbox/agentbox-nodes", arg)
	}
	svc, port, _ := strings.Cut(rest, ":")
	for _, s := range []string{ns, svc} {
		if !dnsLabel(s) {
			return Spec{}, fmt.Errorf("%q: %q is not a Kubernetes name (lowercase letters, digits and '-', at most 63)", arg, s)
		}
	}
	return Spec{Namespace: ns, Service: svc, Port: port}, nil
}

func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func open(ctx context.Context, arg string, log *slog.Logger) (cluster.Discovery, error) {
	spec, err := ParseSpec(arg)
	if err != nil {
		return nil, err
	}
	client, err := Client()
	if err != nil {
		return nil, err
	}
	return New(ctx, client, spec, log)
}

// Discovery watches one Service's EndpointSlices (and, when allowed, the cluster's Nodes) and
// answers Nodes from what the watches last saw.
type Discovery struct {
	spec   Spec
	log    *slog.Logger
	slices cache.SharedIndexInformer
	nodes  cache.SharedIndexInformer // nil when the client may not list Nodes

	mu      sync.Mutex
	current []cluster.Node
	dirty   bool
}

// Interface guards.
var _ cluster.Discovery = (*Discovery)(nil)

// New starts the watches (they end with ctx) and waits for their first lists, at most
// SyncTimeout.
func New(ctx context.Context, client kubernetes.Interface, spec Spec, log *slog.Logger) (*Discovery, error) {
	return newWithin(ctx, client, spec, log, SyncTimeout)
}

// newWithin is New waiting at most within for the API server: its first question (may this
// client list Nodes?) and the watches' first lists both, so an API server that accepts the
// connection and never answers fails the start instead of hanging it. On failure the watches it
// started are stopped.
func newWithin(ctx context.Context, client kubernetes.Interface, spec Spec, log *slog.Logger, within time.Duration) (_ *Discovery, err error) {
	if log == nil {
		log = slog.Default()
	}
	wait, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	ctx, stop := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			stop()
		}
	}()
	d := &Discovery{spec: spec, log: log, dirty: true}
	selector := discoveryv1.LabelServiceName + "=" + spec.Service
	d.slices = discoveryinformers.NewFilteredEndpointSliceInformer(client, spec.Namespace, 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	// Node health is an extra: a gateway given only the namespaced Role still works.
	if _, err := client.CoreV1().Nodes().List(wait, metav1.ListOptions{Limit: 1}); err == nil {
		d.nodes = coreinformers.NewNodeInformer(client, 0, cache.Indexers{})
	} else if apierrors.IsForbidden(err) {
		log.Info("kube discovery: may not list Nodes, so health comes from the EndpointSlices alone", "err", err)
	} else {
		return nil, fmt.Errorf("cannot reach the Kubernetes API: %w", err)
	}
	mark := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.markDirty() },
		UpdateFunc: func(any, any) { d.markDirty() },
		DeleteFunc: func(any) { d.markDirty() },
	}
	synced := []cache.InformerSynced{}
	for _, inf := range []cache.SharedIndexInformer{d.slices, d.nodes} {
		if inf == nil {
			continue
		}
		if _, err := inf.AddEventHandler(mark); err != nil {
			return nil, err
		}
		go inf.Run(ctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(wait.Done(), synced...) {
		return nil, fmt.Errorf("no list of the EndpointSlices of service %s/%s within %v: check the API server and that this service account may list and watch endpointslices (deploy/k8s/rbac.yaml)", spec.Namespace, spec.Service, within)
	}
	return d, nil
}

func (d *Discovery) markDirty() {
	d.mu.Lock()
	d.dirty = true
	d.mu.Unlock()
}

// Nodes returns the node pods behind the Service, sorted by id; it rebuilds the list only after
// a watch event.
func (d *Discovery) Nodes(context.Context) ([]cluster.Node, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirty {
		d.current = d.build()
		d.dirty = false
	}
	return slices.Clone(d.current), nil
}

func (d *Discovery) build() []cluster.Node {
	nodeReady := map[string]bool{}
	if d.nodes != nil {
		for _, o := range d.nodes.GetStore().List() {
			if n, ok := o.(*corev1.Node); ok {
				nodeReady[n.Name] = isNodeReady(n)
			}
		}
	}
	byID := map[string]cluster.Node{}
	for _, o := range d.slices.GetStore().List() {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok || s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		port, ok := pickPort(s.Ports, d.spec.Port)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			n, ok := endpointNode(ep, port)
			if !ok {
				continue
			}
			if ep.NodeName != nil && d.nodes != nil {
				if ready, known := nodeReady[*ep.NodeName]; known && !ready {
					n.Healthy = false
				}
			}
			// One pod may sit in two slices while they are rewritten: healthy wins.
			if old, seen := byID[n.ID]; !seen || (!old.Healthy && n.Healthy) {
				byID[n.ID] = n
			}
		}
	}
	out := make([]cluster.Node, 0, len(byID))
	for _, n := range byID {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b cluster.Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// endpointNode is the node an endpoint is, if it names a pod with an address.
func endpointNode(ep discoveryv1.Endpoint, port int32) (cluster.Node, bool) {
	if len(ep.Addresses) == 0 {
		return cluster.Node{}, false
	}
	var name string
	switch {
	case ep.TargetRef != nil && ep.TargetRef.Kind == "Pod":
		name = ep.TargetRef.Name
	case ep.Hostname != nil:
		name = *ep.Hostname
	default:
		return cluster.Node{}, false
	}
	id := NodeID(name)
	if cluster.ValidNodeID(id) != nil {
		return cluster.Node{}, false
	}
	// Ready nil means unknown, which the API says to read as ready.
	ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
	terminating := ep.Conditions.Terminating != nil && *ep.Conditions.Terminating
	return cluster.Node{
		ID:      id,
		Addr:    "http://" + net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))),
		Healthy: ready && !terminating,
		Source:  "kube",
	}, true
}

// pickPort finds the slice's port: by name or number when asked, else "http", else the first.
func pickPort(ports []discoveryv1.EndpointPort, want string) (int32, bool) {
	var first *discoveryv1.EndpointPort
	for i := range ports {
		p := &ports[i]
		if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		switch {
		case want != "" && (name == want || strconv.Itoa(int(*p.Port)) == want):
			return *p.Port, true
		case want == "" && name == "http":
			return *p.Port, true
		}
		if first == nil {
			first = p
		}
	}
	if want == "" && first != nil {
		return *first.Port, true
	}
	return 0, false
}

func isNodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// inCluster says whether this process runs in a pod with a service account.
func inCluster() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
		return false
	}
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token")
	return err == nil
}
