// Command probe makes one HTTPS GET to a kube-apiserver on loopback and prints the answer's status
// code on the first line and its body after it. `cargo xtask cluster` polls `/readyz` with it and
// its tests read lists with it, so xtask needs no TLS client of its own.
//
// usage: probe URL. The bearer token, if any, comes from $KCACHE_PROBE_TOKEN (not argv, which any
// user of the machine can read). The server's certificate is not verified: it is the self-signed
// serving certificate of a throwaway server the caller started on 127.0.0.1.
//
// Exit status: 0 when the server answered (whatever the status code), 1 when it could not be
// reached, 2 for bad usage.
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: probe URL")
		os.Exit(2)
	}
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
			Proxy:           nil, // loopback only: never through $HTTPS_PROXY
		},
	}
	req, err := http.NewRequest(http.MethodGet, os.Args[1], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if token := os.Getenv("KCACHE_PROBE_TOKEN"); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d\n%s", resp.StatusCode, body)
}
