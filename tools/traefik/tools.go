//go:build tools

// Package traefik pins github.com/traefik/traefik/v3 so that `go build
// github.com/traefik/traefik/v3/cmd/traefik` in this module uses the versions in go.sum.
// Nothing here is compiled.
package traefik

import _ "github.com/traefik/traefik/v3/cmd/traefik"
