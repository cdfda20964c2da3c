//go:build tools

// Package secretsstore pins sigs.k8s.io/secrets-store-csi-driver: its CRD manifests
// (config/crd/bases) are copied from the module cache, and its driver command is built from it, at
// the version recorded in go.sum. Nothing here is compiled.
package secretsstore

import (
	_ "sigs.k8s.io/secrets-store-csi-driver/apis/v1"
	_ "sigs.k8s.io/secrets-store-csi-driver/cmd/secrets-store-csi-driver"
)
