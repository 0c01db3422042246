// Command kubelet is the real Kubernetes node agent, k8s.io/kubernetes/cmd/kubelet of the same
// k8s.io/kubernetes module (and version) hyperkube is built from. A binary of its own rather than
// a hyperkube component: it is what a node runs, and it is built only where real nodes are wanted
// (tools/k8s/node, docs/real-control-plane.md "Real nodes").
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand()))
}
