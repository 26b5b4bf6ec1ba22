// Command etcd starts the etcd server at the version the pinned Kubernetes release requires,
// for tfcompile's local control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
