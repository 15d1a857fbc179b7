package kube

import "strings"

// NodeID is the agentbox node id of the node running in the pod named pod: its lowercase
// letters and digits, the last 32 of them (the random suffix Kubernetes gives a DaemonSet's or
// ReplicaSet's pods is at the end). deploy/k8s's entrypoint computes the same in sh:
// `echo "$POD_NAME" | tr -cd a-z0-9 | tail -c 32`.
func NodeID(pod string) string {
	var b strings.Builder
	for _, r := range pod {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	s := b.String()
	if len(s) > 32 {
		s = s[len(s)-32:]
	}
	return s
}
