// Command hyperkube is the real Kubernetes control plane in one multi-call binary, built from
// the Go module proxy (k8s.io/kubernetes with every staging module replaced by its published
// tag, see go.mod). The first argument picks the component; each runs in its own process,
// because the components share process-wide registries (flags, metrics, feature gates).
//
//	hyperkube etcd [flags]                       embedded etcd (go.etcd.io/etcd/server/v3/embed)
//	hyperkube kube-apiserver [flags]             k8s.io/kubernetes/cmd/kube-apiserver
//	hyperkube kube-controller-manager [flags]    k8s.io/kubernetes/cmd/kube-controller-manager
//	hyperkube kube-scheduler [flags]             k8s.io/kubernetes/cmd/kube-scheduler
//	hyperkube kubectl [args]                     k8s.io/kubectl
//
// Called through a link named after a component (argv[0]), it runs that component.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = `usage: hyperkube COMPONENT [flags]
components: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
`

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "hyperkube" {
		if len(args) == 0 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	os.Exit(run(name, args))
}

// run starts one component with args as its command line. The cobra commands read os.Args, so
// it is rewritten to what the component's own binary would have seen.
func run(name string, args []string) int {
	os.Args = append([]string{name}, args...)
	switch name {
	case "etcd":
		return runEtcd(args)
	case "kube-apiserver":
		return cli.Run(apiserver.NewAPIServerCommand())
	case "kube-controller-manager":
		return cli.Run(controllermanager.NewControllerManagerCommand())
	case "kube-scheduler":
		return cli.Run(scheduler.NewSchedulerCommand())
	case "kubectl":
		if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	case "-h", "--help", "help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "hyperkube: unknown component %q\n%s", name, usage)
	return 2
}
