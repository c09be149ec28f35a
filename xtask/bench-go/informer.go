package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// serverURL is the -server flag: the URL of the `kcache-bench serve` process the informer
// scenarios list and watch (one process shared by every side, loaded with N ConfigMaps).
var serverURL string

// kubeconfigPath is the -kubeconfig flag: a real kube-apiserver instead (`cargo xtask bench
// --cluster local`).
var kubeconfigPath string

// restConfig is the client configuration of the informer scenarios: the kubeconfig's with
// -kubeconfig, else plain HTTP to -server without auth; QPS and burst raised either way so
// client-side throttling is not measured; with KCACHE_BENCH_PROTOBUF=1 the protobuf
// configuration of protobuf.go.
func restConfig() *rest.Config {
	var cfg *rest.Config
	if kubeconfigPath != "" {
		c, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
		if err != nil {
			panic(err)
		}
		cfg = c
	} else {
		if serverURL == "" {
			panic("informer scenarios need -server URL (of `kcache-bench serve`) or -kubeconfig PATH")
		}
		cfg = &rest.Config{Host: serverURL}
	}
	cfg.QPS, cfg.Burst = 1e6, 1e6
	configureEncoding(cfg)
	return cfg
}

// stripManagedFieldsOn tells whether KCACHE_BENCH_STRIP_MANAGED_FIELDS=1 (`cargo xtask bench
// --managed-fields strip`); otherwise client-go's default, keeping them, holds.
func stripManagedFieldsOn() bool {
	return os.Getenv("KCACHE_BENCH_STRIP_MANAGED_FIELDS") == "1"
}

// stripManagedFields clears obj's managed fields, as controller-runtime's
// cache.TransformStripManagedFields does.
func stripManagedFields(obj interface{}) {
	if o, err := meta.Accessor(obj); err == nil && o.GetManagedFields() != nil {
		o.SetManagedFields(nil)
	}
}

// newInformer is the informer of every scenario: cache.NewSharedIndexInformer(lw, &v1.ConfigMap{},
// no resync, {namespace: MetaNamespaceIndexFunc}); with KCACHE_BENCH_STRIP_MANAGED_FIELDS=1 (`cargo
// xtask bench --managed-fields strip`) it also gets the transform Go users write to drop managed
// fields, as controller-runtime's cache.TransformStripManagedFields: SetManagedFields(nil) on each
// object after it was decoded.
func newInformer(lw cache.ListerWatcher) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(lw, &v1.ConfigMap{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if stripManagedFieldsOn() {
		err := inf.SetTransform(func(in interface{}) (interface{}, error) {
			stripManagedFields(in)
			return in, nil
		})
		if err != nil {
			panic(err)
		}
	}
	return inf
}

// informerSynced returns the time-to-synced scenario of a SharedIndexInformer for ConfigMaps in
// all namespaces: with a core/v1 client for the server made untimed (no auth; QPS and burst
// raised so client-side throttling is not measured), timed: cache.NewSharedIndexInformer(
// NewListWatchFromClient(configmaps, all namespaces), &v1.ConfigMap{}, no resync,
// {namespace: MetaNamespaceIndexFunc}) started with Run until the channel of its HasSyncedChecker() closes (no polling). With
// watchList the WatchListClient feature gate is on (client-go 1.37's default: one watch with
// sendInitialEvents), without it off (a list, then a watch). ops = objects in the store when
// synced (N loaded into the server); peak_rss_bytes is the figure to compare.
func informerSynced(watchList bool) func(n int, t *timer) (int64, map[string]any) {
	return func(_ int, t *timer) (int64, map[string]any) {
		// client-go reads its feature gates from the environment on first use.
		if err := os.Setenv("KUBE_FEATURE_WatchListClient", fmt.Sprint(watchList)); err != nil {
			panic(err)
		}
		cs, err := corev1client.NewForConfig(restConfig())
		if err != nil {
			panic(err)
		}
		lw := cache.NewListWatchFromClient(cs.RESTClient(), "configmaps", v1.NamespaceAll, fields.Everything())
		stop := make(chan struct{})
		t.start()
		inf := newInformer(lw)
		go inf.Run(stop)
		// HasSyncedChecker's channel closes the moment the informer has synced;
		// cache.WaitForCacheSync would poll every 100ms and round the time up.
		select {
		case <-inf.HasSyncedChecker().Done():
		case <-time.After(60 * time.Second):
			panic("informer not synced within 60 s")
		}
		t.stop()
		items := len(inf.GetStore().ListKeys())
		close(stop)
		return int64(items), map[string]any{"items": items, "watch_list": watchList}
	}
}

// countingHandler counts the Add notifications it is handed and closes done at the n-th.
type countingHandler struct {
	n    int64
	seen atomic.Int64
	done chan struct{}
}

func (h *countingHandler) OnAdd(_ interface{}, _ bool) {
	if h.seen.Add(1) == h.n {
		close(h.done)
	}
}
func (h *countingHandler) OnUpdate(_, _ interface{}) {}
func (h *countingHandler) OnDelete(_ interface{})    {}

// eventFanout: a SharedIndexInformer as in informerSynced (client-go defaults: watch-list on) with
// 3 event handlers registered before it starts, each counting its Add notifications. Timed: from
// Run until every handler has been handed all N objects of the server (N = ConfigMaps loaded,
// default 100k) as Adds. ops = 3N notifications delivered.
func eventFanout(n int, t *timer) (int64, map[string]any) {
	cs, err := corev1client.NewForConfig(restConfig())
	if err != nil {
		panic(err)
	}
	lw := cache.NewListWatchFromClient(cs.RESTClient(), "configmaps", v1.NamespaceAll, fields.Everything())
	inf := newInformer(lw)
	handlers := make([]*countingHandler, 3)
	for i := range handlers {
		handlers[i] = &countingHandler{n: int64(n), done: make(chan struct{})}
		if _, err := inf.AddEventHandler(handlers[i]); err != nil {
			panic(err)
		}
	}
	stop := make(chan struct{})
	t.start()
	go inf.Run(stop)
	timeout := time.After(60 * time.Second)
	for _, h := range handlers {
		select {
		case <-h.done:
		case <-timeout:
			panic("handlers did not see every object within 60 s")
		}
	}
	t.stop()
	close(stop)
	return int64(3 * n), map[string]any{"handlers": 3, "objects": n}
}

// sentinelHandler closes done when the ConfigMap bench/sentinel is added.
type sentinelHandler struct{ done chan struct{} }

func (h *sentinelHandler) OnAdd(obj interface{}, _ bool) {
	if cm, ok := obj.(*v1.ConfigMap); ok && cm.Namespace == "bench" && cm.Name == "sentinel" {
		close(h.done)
	}
}
func (h *sentinelHandler) OnUpdate(_, _ interface{}) {}
func (h *sentinelHandler) OnDelete(_ interface{})    {}

// informerMemory (kube-rs's memory scenario): against a fresh `kcache-bench serve --mutate` loaded
// with N ConfigMaps (default 10k) that, once the client watches, updates N/2 of them, deletes N/10
// and creates bench/sentinel. A SharedIndexInformer as in informerSynced with client-go's defaults
// (watch-list on) and one handler that waits for the sentinel; timed from Run until the sentinel
// is added. The figure to compare is peak_rss_bytes. ops = N; extra.items = objects in the store
// at the end (N - N/10 + 1).
func informerMemory(n int, t *timer) (int64, map[string]any) {
	cs, err := corev1client.NewForConfig(restConfig())
	if err != nil {
		panic(err)
	}
	lw := cache.NewListWatchFromClient(cs.RESTClient(), "configmaps", v1.NamespaceAll, fields.Everything())
	stop := make(chan struct{})
	t.start()
	inf := newInformer(lw)
	h := &sentinelHandler{done: make(chan struct{})}
	if _, err := inf.AddEventHandler(h); err != nil {
		panic(err)
	}
	go inf.Run(stop)
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
		panic("the sentinel did not arrive within 60 s")
	}
	t.stop()
	items := len(inf.GetStore().ListKeys())
	close(stop)
	return int64(n), map[string]any{"items": items}
}
