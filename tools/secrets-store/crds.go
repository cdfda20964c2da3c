//go:build tools

// Package secretsstore pins sigs.k8s.io/secrets-store-csi-driver so that its CRD manifests
// (config/crd/bases) come from the module cache at a version recorded in go.sum. Nothing here is
// compiled.
package secretsstore

import _ "sigs.k8s.io/secrets-store-csi-driver/apis/v1"
