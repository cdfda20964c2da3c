//go:build tools

// Package crds pins cert-manager and Envoy Gateway so that their CRD manifests
// (deploy/crds, charts/gateway-helm/crds/generated) come from the module cache at versions
// recorded in go.sum. Nothing here is compiled.
package crds

import (
	_ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	_ "github.com/envoyproxy/gateway/api/v1alpha1"
)
