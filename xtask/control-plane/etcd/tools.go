//go:build tools

// Package tools pins etcd's main package (the root of go.etcd.io/etcd/server/v3) so
// `go mod tidy` keeps its dependencies.
package tools

import _ "go.etcd.io/etcd/server/v3"
