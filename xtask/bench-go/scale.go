//go:build scale

package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// The scale scenarios (issue #37) are built only with -tags scale (`cargo xtask bench` builds
// bin/bench-go-scale for them): linking client-go's informers and metadatainformer packages
// into the binary every other scenario runs in would add their init work and pages to those
// scenarios' RSS.
func init() {
	scenarios["scale_full"] = scenario{100_000, 20_000, scale(false), "k8s.io/client-go/informers.SharedInformerFactory (pods, secrets, configmaps)"}
	scenarios["scale_metadata"] = scenario{100_000, 20_000, scale(true), "k8s.io/client-go/metadata/metadatainformer.SharedInformerFactory (pods, secrets, configmaps)"}
}

// rssBytes is the resident set now (/proc/self/statm's second field, in pages).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// steadyRSS is the resident set once synced: one second idle, then a collection and the freed
// memory handed back to the OS (runtime.GC, debug.FreeOSMemory), as kcache-bench does with
// malloc_trim: what the caches hold, not how lazily the runtime returns memory.
func steadyRSS() int64 {
	time.Sleep(time.Second)
	runtime.GC()
	debug.FreeOSMemory()
	return rssBytes()
}

// waitSynced waits for every informer's HasSyncedChecker (no polling).
func waitSynced(infs ...cache.SharedIndexInformer) {
	timeout := time.After(240 * time.Second)
	for _, inf := range infs {
		select {
		case <-inf.HasSyncedChecker().Done():
		case <-timeout:
			panic("informers not synced within 240 s")
		}
	}
}

// stripIfAsked gives each informer the transform that drops managed fields (as
// controller-runtime's cache.TransformStripManagedFields) when KCACHE_BENCH_STRIP_MANAGED_FIELDS=1
// (`cargo xtask bench --managed-fields strip`); client-go's default, keeping them, otherwise.
func stripIfAsked(infs []cache.SharedIndexInformer) {
	if !stripManagedFieldsOn() {
		return
	}
	for _, inf := range infs {
		err := inf.SetTransform(func(in interface{}) (interface{}, error) {
			stripManagedFields(in)
			return in, nil
		})
		if err != nil {
			panic(err)
		}
	}
}

// scale (issue #37): against `kcache-bench serve --pods N` (N Pods shaped like a real cluster's,
// N/5 Secrets, N/10 ConfigMaps), one informer each for Pods, Secrets and ConfigMaps in all
// namespaces, client-go's defaults (watch-list on, managed fields kept, no transform; with
// --managed-fields strip the transform of stripIfAsked). Full:
// informers.NewSharedInformerFactory(clientset, 0) and its Core().V1() informers. Metadata:
// metadatainformer.NewSharedInformerFactory(metadata client, 0).ForResource(gvr), caching
// *metav1.PartialObjectMetadata. Timed: from building the factory until all three are synced.
// extra.steady_rss_bytes: see steadyRSS.
func scale(metadataOnly bool) func(n int, t *timer) (int64, map[string]any) {
	return func(_ int, t *timer) (int64, map[string]any) {
		cfg := restConfig()
		stop := make(chan struct{})
		var infs []cache.SharedIndexInformer
		if metadataOnly {
			mc, err := metadata.NewForConfig(cfg)
			if err != nil {
				panic(err)
			}
			t.start()
			f := metadatainformer.NewSharedInformerFactory(mc, 0)
			for _, r := range []string{"pods", "secrets", "configmaps"} {
				infs = append(infs, f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: r}).Informer())
			}
			stripIfAsked(infs)
			f.Start(stop)
		} else {
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				panic(err)
			}
			t.start()
			f := informers.NewSharedInformerFactory(cs, 0)
			core := f.Core().V1()
			infs = append(infs, core.Pods().Informer(), core.Secrets().Informer(), core.ConfigMaps().Informer())
			stripIfAsked(infs)
			f.Start(stop)
		}
		waitSynced(infs...)
		t.stop()
		peak := maxRSS()
		steady := steadyRSS()
		items := 0
		for _, inf := range infs {
			items += len(inf.GetStore().ListKeys())
		}
		close(stop)
		return int64(items), map[string]any{"items": items, "peak_rss_at_synced_bytes": peak,
			"steady_rss_bytes": steady, "metadata_only": metadataOnly}
	}
}
