// Command fake-provider serves the Secrets Store CSI driver project's own test provider
// (sigs.k8s.io/secrets-store-csi-driver/provider/fake, the provider its unit tests mount against)
// on the provider socket the driver dials, for the local cluster's real nodes. The provider
// answers every Mount with the same files: the store's content, read once at start from a JSON
// object of file name to content (--store). A key the store lacks is therefore no file in the
// mount, as a provider whose store has no such object returns nothing for it; the driver then
// cannot sync that key into its Secret and says so in an event on the pod.
// Nothing here is krane's: a test and dev tool for the local cluster.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"

	"sigs.k8s.io/secrets-store-csi-driver/provider/fake"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"
)

func main() {
	dir := flag.String("provider-volume", "", "the driver's provider directory (its --provider-volume)")
	name := flag.String("name", "krane-fake", "the provider's name (a SecretProviderClass's spec.provider)")
	store := flag.String("store", "", "JSON file: an object of file name to content")
	flag.Parse()
	if *dir == "" || *store == "" {
		log.Fatal("fake-provider: --provider-volume and --store are required")
	}
	raw, err := os.ReadFile(*store)
	if err != nil {
		log.Fatal(err)
	}
	content := map[string]string{}
	if err := json.Unmarshal(raw, &content); err != nil {
		log.Fatalf("fake-provider: %s: %v", *store, err)
	}
	names := make([]string, 0, len(content))
	for n := range content {
		names = append(names, n)
	}
	sort.Strings(names)
	files := make([]*v1alpha1.File, 0, len(names))
	versions := map[string]string{}
	for _, n := range names {
		// Readable by the pod's user whoever it is: the mount is read-only and the pod's own.
		files = append(files, &v1alpha1.File{Path: n, Mode: 0o444, Contents: []byte(content[n])})
		versions["secret/"+n] = "v1"
	}

	if err := os.MkdirAll(*dir, 0o750); err != nil {
		log.Fatal(err)
	}
	socket := filepath.Join(*dir, *name+".sock")
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	server, err := fake.NewMocKCSIProviderServer(socket)
	if err != nil {
		log.Fatal(err)
	}
	server.SetFiles(files)
	server.SetObjects(versions)
	if err := server.Start(); err != nil {
		log.Fatal(err)
	}
	log.Printf("provider %s serving %d objects on %s", *name, len(files), socket)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	server.Stop()
	_ = os.Remove(socket)
}
