//go:build tools

// Package kube pins sigs.k8s.io/gateway-api so that its CRD manifests (config/crd/standard)
// come from the module cache at a version recorded in go.sum. Nothing here is compiled.
package kube

import _ "sigs.k8s.io/gateway-api/apis/v1"
