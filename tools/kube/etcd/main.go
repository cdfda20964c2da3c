// Command etcd is etcd's own server entry point, wrapped so that it builds from the
// Go module proxy (etcd's server module cannot be `go install`ed: it has replace lines).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
