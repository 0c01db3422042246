// Command kubectl is the real kubectl (k8s.io/kubectl), built from the Go module proxy so that
// the tests use the same client as a user does. It is the upstream main, unchanged.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
