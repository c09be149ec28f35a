package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
)

// signallingStore is cache.NewStore(cache.MetaNamespaceKeyFunc) that closes replaced at its first
// Replace (the initial sync), firstUpdate at its first Update, and sentinel when bench/sentinel
// is added (kcache-bench's SignallingStore does the same). With stripManagedFieldsOn it clears
// each object's managed fields before storing it, as a Go user of a bare reflector would (the
// reflector has no transform of its own).
type signallingStore struct {
	cache.Store
	strip                                  bool
	replacedOnce, updateOnce, sentinelOnce sync.Once
	replaced, firstUpdate, sentinel        chan struct{}
}

func newSignallingStore() *signallingStore {
	return &signallingStore{
		Store:       cache.NewStore(cache.MetaNamespaceKeyFunc),
		strip:       stripManagedFieldsOn(),
		replaced:    make(chan struct{}),
		firstUpdate: make(chan struct{}),
		sentinel:    make(chan struct{}),
	}
}

func isSentinel(obj interface{}) bool {
	cm, ok := obj.(*v1.ConfigMap)
	return ok && cm.Namespace == "bench" && cm.Name == "sentinel"
}

func (s *signallingStore) Add(obj interface{}) error {
	if s.strip {
		stripManagedFields(obj)
	}
	err := s.Store.Add(obj)
	if isSentinel(obj) {
		s.sentinelOnce.Do(func() { close(s.sentinel) })
	}
	return err
}

func (s *signallingStore) Update(obj interface{}) error {
	s.updateOnce.Do(func() { close(s.firstUpdate) })
	if s.strip {
		stripManagedFields(obj)
	}
	return s.Store.Update(obj)
}

func (s *signallingStore) Replace(list []interface{}, rv string) error {
	if s.strip {
		for _, obj := range list {
			stripManagedFields(obj)
		}
	}
	err := s.Store.Replace(list, rv)
	s.replacedOnce.Do(func() { close(s.replaced) })
	for _, obj := range list {
		if isSentinel(obj) {
			s.sentinelOnce.Do(func() { close(s.sentinel) })
		}
	}
	return err
}

func configMapListWatch() *cache.ListWatch {
	cs, err := corev1client.NewForConfig(restConfig())
	if err != nil {
		panic(err)
	}
	return cache.NewListWatchFromClient(cs.RESTClient(), "configmaps", v1.NamespaceAll, fields.Everything())
}

// reflectorSynced returns reflector_synced_{list,watchlist}_50k: with the client made untimed
// (as informerSynced), timed: cache.NewReflector(the ListWatch, &v1.ConfigMap{}, the store above,
// no resync) started with Run until the store's first Replace returns (the initial sync; no
// polling). WatchListClient is on (one watch with sendInitialEvents) or off (list, then watch).
// ops = objects in the store (N loaded into the server).
func reflectorSynced(watchList bool) func(n int, t *timer) (int64, map[string]any) {
	return func(_ int, t *timer) (int64, map[string]any) {
		if err := os.Setenv("KUBE_FEATURE_WatchListClient", fmt.Sprint(watchList)); err != nil {
			panic(err)
		}
		lw := configMapListWatch()
		stop := make(chan struct{})
		t.start()
		store := newSignallingStore()
		r := cache.NewReflector(lw, &v1.ConfigMap{}, store, 0)
		go r.Run(stop)
		select {
		case <-store.replaced:
		case <-time.After(60 * time.Second):
			panic("reflector not synced within 60 s")
		}
		t.stop()
		items := len(store.ListKeys())
		close(stop)
		return int64(items), map[string]any{"items": items, "watch_list": watchList}
	}
}

// reflectorEventThroughput (reflector_event_throughput): against a fresh `kcache-bench serve
// --mutate --updates N` (10k ConfigMaps; once watched, N updates as fast as the server takes them,
// then bench/sentinel). A reflector with client-go's defaults into the store above; timed from the
// store's first Update until the sentinel is added. ops = N updates.
func reflectorEventThroughput(n int, t *timer) (int64, map[string]any) {
	lw := configMapListWatch()
	stop := make(chan struct{})
	store := newSignallingStore()
	r := cache.NewReflector(lw, &v1.ConfigMap{}, store, 0)
	go r.Run(stop)
	select {
	case <-store.firstUpdate:
	case <-time.After(60 * time.Second):
		panic("no update within 60 s")
	}
	t.start()
	select {
	case <-store.sentinel:
	case <-time.After(120 * time.Second):
		panic("the sentinel did not arrive within 120 s")
	}
	t.stop()
	items := len(store.ListKeys())
	close(stop)
	return int64(n), map[string]any{"items": items}
}
