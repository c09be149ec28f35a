package main

import (
	"net/http"
	"os"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// The client-go side's protobuf configuration (issue 38): `cargo xtask bench` runs this binary a
// second time as the side "client-go-protobuf" with KCACHE_BENCH_PROTOBUF=1. It is the
// configuration of Go controllers that care about speed (kube-controller-manager, kube-scheduler,
// controller-runtime with a tuned config): requests and responses for built-in types in
// Kubernetes' protobuf encoding,
//
//	cfg.ContentType = "application/vnd.kubernetes.protobuf"
//	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
//
// (JSON stays acceptable, as in kube-controller-manager's client configuration, for what the
// server cannot send as protobuf).

// protobufContentType is Kubernetes' protobuf media type (runtime.ContentTypeProtobuf).
const protobufContentType = "application/vnd.kubernetes.protobuf"

// protobufOn tells whether KCACHE_BENCH_PROTOBUF=1.
func protobufOn() bool { return os.Getenv("KCACHE_BENCH_PROTOBUF") == "1" }

// sideName is the "side" field of the result lines: "client-go", or "client-go-protobuf" in the
// protobuf configuration.
func sideName() string {
	if protobufOn() {
		return "client-go-protobuf"
	}
	return "client-go"
}

// responseTypes counts the responses the scenario's client received by media type (the
// Content-Type without parameters), so a result line shows which encoding was really spoken: a
// server that cannot send protobuf answers JSON, which the side must not be credited with.
var responseTypes = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

type countingTransport struct{ next http.RoundTripper }

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.next.RoundTrip(req)
	if err == nil {
		mt, _, _ := strings.Cut(res.Header.Get("Content-Type"), ";")
		responseTypes.Lock()
		responseTypes.n[strings.TrimSpace(mt)]++
		responseTypes.Unlock()
	}
	return res, err
}

// configureEncoding applies the protobuf configuration to cfg when protobufOn, and counts the
// responses' media types either way.
func configureEncoding(cfg *rest.Config) {
	if protobufOn() {
		cfg.ContentType = protobufContentType
		cfg.AcceptContentTypes = protobufContentType + ",application/json"
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt} })
}

// responseTypeCounts returns a copy of the counts (extra.response_types).
func responseTypeCounts() map[string]int {
	responseTypes.Lock()
	defer responseTypes.Unlock()
	out := make(map[string]int, len(responseTypes.n))
	for k, v := range responseTypes.n {
		out[k] = v
	}
	return out
}
