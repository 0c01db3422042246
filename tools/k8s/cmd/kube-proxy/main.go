// Command kube-proxy is the real Kubernetes service proxy (iptables mode), k8s.io/kubernetes/
// cmd/kube-proxy of the same k8s.io/kubernetes module hyperkube and kubelet are built from. Run
// by tools/k8s/node/node --proxy next to a real node's kubelet.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
