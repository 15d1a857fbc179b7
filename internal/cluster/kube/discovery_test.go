package kube

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/agentbox-dev/agentbox/internal/cluster"
)

func TestParseSpec(t *testing.T) {
	t.Parallel()
	for arg, want := range map[string]Spec{
		"agentbox/agentbox-nodes":      {Namespace: "agentbox", Service: "agentbox-nodes"},
		"agentbox/agentbox-nodes:8421": {Namespace: "agentbox", Service: "agentbox-nodes", Port: "8421"},
		"ns/svc:http":                  {Namespace: "ns", Service: "svc", Port: "http"},
	} {
		got, err := ParseSpec(arg)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", arg, got, err, want)
		}
	}
	for arg, msg := range map[string]string{
		"svc":        "NAMESPACE/SERVICE",
		"/svc":       "NAMESPACE/SERVICE",
		"ns/":        "NAMESPACE/SERVICE",
		"NS/svc":     "not a Kubernetes name",
		"ns/svc_one": "not a Kubernetes name",
	} {
		if _, err := ParseSpec(arg); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseSpec(%q) = %v; want an error saying %q", arg, err, msg)
		}
	}
}

func TestNodeID(t *testing.T) {
	t.Parallel()
	for pod, want := range map[string]string{
		"agentbox-node-x7k2p": "agentboxnodex7k2p",
		"agentbox-node-0":     "agentboxnode0",
		"a-very-long-daemonset-name-for-agentbox-nodes-abcde": "emonsetnameforagentboxnodesabcde",
	} {
		got := NodeID(pod)
		if got != want || cluster.ValidNodeID(got) != nil {
			t.Errorf("NodeID(%q) = %q; want %q (a valid node id)", pod, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func endpoint(pod, ip, kubeNode string, ready, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready), Serving: ptr(ready), Terminating: ptr(terminating)},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "agentbox", Name: pod},
		NodeName:   ptr(kubeNode),
	}
}

func slice(name, service string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "agentbox",
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr("metrics"), Port: ptr(int32(9100)), Protocol: ptr(corev1.ProtocolTCP)},
			{Name: ptr("http"), Port: ptr(int32(8421)), Protocol: ptr(corev1.ProtocolTCP)},
		},
		Endpoints: eps,
	}
}

func kubeNode(name string, ready bool) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
}

// waitNodes polls d until it returns want (watch events arrive asynchronously), or fails.
func waitNodes(t *testing.T, d *Discovery, want []cluster.Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := d.Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(got, want) || (len(got) == 0 && len(want) == 0) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes\n got %+v\nwant %+v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The discovery follows the Service's slices through the watch: pods that appear, turn
// unready or terminate, slices of other services ignored, node health from the Node's Ready.
func TestDiscoveryFollowsSlices(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objs := []runtime.Object{
		kubeNode("k1", true), kubeNode("k2", true),
		slice("nodes-a", "agentbox-nodes",
			endpoint("agentbox-node-aaaaa", "10.1.0.5", "k1", true, false),
			endpoint("agentbox-node-bbbbb", "10.1.0.6", "k2", false, false)),
		slice("other", "something-else", endpoint("other-ccccc", "10.1.0.7", "k1", true, false)),
	}
	client := fake.NewClientset(objs...)
	d, err := New(ctx, client, Spec{Namespace: "agentbox", Service: "agentbox-nodes"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := cluster.Node{ID: "agentboxnodeaaaaa", Addr: "http://10.1.0.5:8421", Healthy: true, Source: "kube"}
	b := cluster.Node{ID: "agentboxnodebbbbb", Addr: "http://10.1.0.6:8421", Healthy: false, Source: "kube"}
	waitNodes(t, d, []cluster.Node{a, b})

	// b turns ready; a third pod appears in a second slice of the same service.
	s := slice("nodes-a", "agentbox-nodes",
		endpoint("agentbox-node-aaaaa", "10.1.0.5", "k1", true, false),
		endpoint("agentbox-node-bbbbb", "10.1.0.6", "k2", true, false))
	if _, err := client.DiscoveryV1().EndpointSlices("agentbox").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := cluster.Node{ID: "agentboxnodeccccc", Addr: "http://10.1.0.8:8421", Healthy: true, Source: "kube"}
	if _, err := client.DiscoveryV1().EndpointSlices("agentbox").Create(ctx,
		slice("nodes-b", "agentbox-nodes", endpoint("agentbox-node-ccccc", "10.1.0.8", "k1", true, false)),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Healthy = true
	waitNodes(t, d, []cluster.Node{a, b, c})

	// b's Kubernetes node goes NotReady: b is unhealthy though its endpoint still says ready.
	if _, err := client.CoreV1().Nodes().Update(ctx, kubeNode("k2", false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Healthy = false
	waitNodes(t, d, []cluster.Node{a, b, c})

	// a terminates (pod deleted, endpoint kept while it drains), then its slice loses it; c's
	// slice goes away.
	s = slice("nodes-a", "agentbox-nodes",
		endpoint("agentbox-node-aaaaa", "10.1.0.5", "k1", true, true),
		endpoint("agentbox-node-bbbbb", "10.1.0.6", "k2", true, false))
	if _, err := client.DiscoveryV1().EndpointSlices("agentbox").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.Healthy = false
	waitNodes(t, d, []cluster.Node{a, b, c})
	s = slice("nodes-a", "agentbox-nodes", endpoint("agentbox-node-bbbbb", "10.1.0.6", "k2", true, false))
	if _, err := client.DiscoveryV1().EndpointSlices("agentbox").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.DiscoveryV1().EndpointSlices("agentbox").Delete(ctx, "nodes-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNodes(t, d, []cluster.Node{b})
}

func TestPickPort(t *testing.T) {
	t.Parallel()
	ports := slice("x", "y").Ports
	for want, port := range map[string]int32{"": 8421, "http": 8421, "metrics": 9100, "9100": 9100} {
		if got, ok := pickPort(ports, want); !ok || got != port {
			t.Errorf("pickPort(%q) = %d, %v; want %d", want, got, ok, port)
		}
	}
	if _, ok := pickPort(ports, "grpc"); ok {
		t.Error("pickPort found a port the slice does not have")
	}
	if got, ok := pickPort(ports[:1], ""); !ok || got != 9100 {
		t.Errorf("without an http port the first is taken, got %d, %v", got, ok)
	}
}
