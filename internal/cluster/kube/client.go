package kube

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Client connects to the API server as the process finds it: inside a pod through its service
// account (rest.InClusterConfig), elsewhere through KUBECONFIG or ~/.kube/config, as kubectl
// does.
func Client() (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if inCluster() {
		cfg, err = rest.InClusterConfig()
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("no Kubernetes client configuration (not in a pod with a service account, and KUBECONFIG / ~/.kube/config: %v)", err)
	}
	cfg.UserAgent = "agentbox-gateway"
	return kubernetes.NewForConfig(cfg)
}
