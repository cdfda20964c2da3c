// Command cert-manager-controller runs cert-manager's own certificate controllers (v1.21.1, from
// the github.com/cert-manager/cert-manager module) against the local cluster, for krane's TLS
// tests and `krane dev`. cert-manager's controller binary lives in a module of its own
// (cmd/controller, module path .../controller-binary) that refers to the main module through a
// relative replace, so it cannot be required by version; this small main does what its start-up
// does for the controllers a CA ClusterIssuer needs: build the controller context from a
// kubeconfig, start each named controller, then the shared informers. No webhook, no ACME, no
// leader election (one process per local cluster), no metrics server.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// Register the CA and self-signed issuers' setup (what the (cluster)issuers controllers run).
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// The controllers a Certificate issued by a CA (Cluster)Issuer goes through, from trigger to Ready,
// and the self-signed issuer that makes the local CA's own certificate.
var enabled = []string{
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
	approver.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
	clusterissuers.ControllerName,
	issuers.ControllerName,
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager", "namespace of ClusterIssuers' Secrets")
	workers := flag.Int("workers", 5, "workers per controller")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig, *clusterNS, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, clusterNS string, workers int) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controller.CertificateOptions{
			// cert-manager's defaults (1h, 32h) would stall a test after one failed request.
			CertificateRequestMinimumBackoffDuration: 5 * time.Second,
			CertificateRequestMaximumBackoffDuration: time.Minute,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	known := controller.Known()
	g, ctx := errgroup.WithContext(ctx)
	for _, name := range enabled {
		construct, ok := known[name]
		if !ok {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("controller %q is not registered (known: %s)", name, strings.Join(names, ", "))
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error { return c.Run(workers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	fmt.Println("cert-manager controllers started:", strings.Join(enabled, ", "))
	return g.Wait()
}
