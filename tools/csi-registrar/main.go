// Command csi-registrar registers a node-local CSI driver with the kubelet of one of the local
// cluster's real nodes, as node-driver-registrar does in a real cluster (README.md says why not
// that module). It serves the kubelet's plugin registration API (k8s.io/kubelet pluginregistration
// v1) on a socket in the kubelet's plugins_registry directory: the kubelet's plugin watcher finds
// the socket, asks GetInfo (a CSI plugin, its name, the driver's own socket, CSI 1.0.0), calls the
// driver's NodeGetInfo itself, and reports the outcome through NotifyRegistrationStatus; a refusal
// ends this process with the kubelet's reason.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	refused        chan string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              r.name,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		log.Printf("the kubelet registered %s (driver socket %s)", r.name, r.endpoint)
	} else {
		select {
		case r.refused <- s.Error:
		default:
		}
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func main() {
	name := flag.String("driver-name", "", "the CSI driver's name (its CSIDriver object)")
	endpoint := flag.String("csi-address", "", "the driver's CSI socket, as the kubelet reaches it")
	registry := flag.String("plugin-registration-dir", "", "the kubelet's plugins_registry directory")
	flag.Parse()
	if *name == "" || *endpoint == "" || *registry == "" {
		fmt.Fprintln(os.Stderr, "csi-registrar: --driver-name, --csi-address and --plugin-registration-dir are required")
		os.Exit(2)
	}
	if err := os.MkdirAll(*registry, 0o750); err != nil {
		log.Fatal(err)
	}
	socket := filepath.Join(*registry, *name+"-reg.sock")
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatal(err)
	}
	r := &registrar{name: *name, endpoint: *endpoint, refused: make(chan string, 1)}
	server := grpc.NewServer()
	registerapi.RegisterRegistrationServer(server, r)
	go func() {
		if err := server.Serve(lis); err != nil {
			log.Fatal(err)
		}
	}()
	log.Printf("serving plugin registration for %s on %s", *name, socket)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case why := <-r.refused:
		server.Stop()
		_ = os.Remove(socket)
		log.Fatalf("the kubelet refused %s: %s", *name, why)
	case <-stop:
		// Removing the socket unregisters the driver from the kubelet.
		server.Stop()
		_ = os.Remove(socket)
	}
}
