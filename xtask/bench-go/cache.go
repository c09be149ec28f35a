package main

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// fifoUpdates is the number of versions of every object pushed through the FIFO scenarios: one
// Add and four Updates.
const fifoUpdates = 5

// fifoObjects returns objs[r][i] = object(i, r*N + i + 1) for r in 0..4 (r = 0: the version
// added, 1..4: the updates).
func fifoObjects(n int) [][]*v1.ConfigMap {
	objs := make([][]*v1.ConfigMap, fifoUpdates)
	for r := range objs {
		objs[r] = make([]*v1.ConfigMap, n)
		for i := range objs[r] {
			objs[r][i] = object(i, r*n+i+1)
		}
	}
	return objs
}

// fifo is what the FIFO scenarios need from DeltaFIFO and RealFIFO.
type fifo interface {
	Add(obj interface{}) error
	Update(obj interface{}) error
	Pop(process cache.PopProcessFunc) (interface{}, error)
}

// pushAll adds objs[0] and applies objs[1..4] as updates, round by round (every key once per
// round, keys in index order).
func pushAll(f fifo, objs [][]*v1.ConfigMap) {
	for r, round := range objs {
		for _, o := range round {
			var err error
			if r == 0 {
				err = f.Add(o)
			} else {
				err = f.Update(o)
			}
			if err != nil {
				panic(err)
			}
		}
	}
}

// deltaFIFO: N keys (default 100k) x 5 versions (fifoObjects, built untimed) through a
// cache.DeltaFIFO made with NewDeltaFIFOWithOptions{KeyFunction: MetaNamespaceKeyFunc,
// KnownObjects: an empty cache.NewIndexer (as an informer passes its indexer),
// EmitDeltaTypeReplaced: true}. Timed: push all 5N events (pushAll), then Pop until every key has
// been popped, the process function counting the deltas it is handed and summing the
// resourceVersions of the newest delta. ops = 5N events; extra.deltas = 5N, extra.pops = N,
// extra.checksum = sum of the popped newest resourceVersions.
func deltaFIFO(n int, t *timer) (int64, map[string]any) {
	objs := fifoObjects(n)
	known := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	t.start()
	f := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
		KeyFunction:           cache.MetaNamespaceKeyFunc,
		KnownObjects:          known,
		EmitDeltaTypeReplaced: true,
	})
	pushAll(f, objs)
	var deltas, pops int
	var checksum uint64
	for pops < n {
		_, err := f.Pop(func(obj interface{}, _ bool) error {
			ds := obj.(cache.Deltas)
			deltas += len(ds)
			checksum += rv(ds.Newest().Object)
			return nil
		})
		if err != nil {
			panic(err)
		}
		pops++
	}
	t.stop()
	return int64(fifoUpdates * n), map[string]any{"deltas": deltas, "pops": pops, "checksum": checksum}
}

// realFIFO: the deltaFIFO workload through the in-order cache.RealFIFO made with
// NewRealFIFOWithOptions{KeyFunction: MetaNamespaceKeyFunc, KnownObjects: an empty
// cache.NewIndexer}: every event stays a separate entry, so it takes 5N Pops. ops = 5N events;
// extra.deltas = 5N, extra.pops = 5N, extra.checksum = sum of the popped resourceVersions.
func realFIFO(n int, t *timer) (int64, map[string]any) {
	objs := fifoObjects(n)
	known := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	t.start()
	f := cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{
		KeyFunction:  cache.MetaNamespaceKeyFunc,
		KnownObjects: known,
	})
	pushAll(f, objs)
	var deltas, pops int
	var checksum uint64
	for deltas < fifoUpdates*n {
		_, err := f.Pop(func(obj interface{}, _ bool) error {
			ds := obj.(cache.Deltas)
			deltas += len(ds)
			for _, d := range ds {
				checksum += rv(d.Object)
			}
			return nil
		})
		if err != nil {
			panic(err)
		}
		pops++
	}
	t.stop()
	return int64(fifoUpdates * n), map[string]any{"deltas": deltas, "pops": pops, "checksum": checksum}
}

func rv(obj interface{}) uint64 {
	v, err := strconv.ParseUint(obj.(*v1.ConfigMap).ResourceVersion, 10, 64)
	if err != nil {
		panic(err)
	}
	return v
}

// labelIndexFunc indexes an object by the value of one label.
func labelIndexFunc(label string) cache.IndexFunc {
	return func(obj interface{}) ([]string, error) {
		cm, ok := obj.(*v1.ConfigMap)
		if !ok {
			return nil, fmt.Errorf("not a ConfigMap: %T", obj)
		}
		if v, ok := cm.Labels[label]; ok {
			return []string{v}, nil
		}
		return nil, nil
	}
}

// newIndexer returns the store of the store scenarios: cache.NewIndexer(MetaNamespaceKeyFunc)
// with three indexers: "namespace" (cache.MetaNamespaceIndexFunc: 100 values), "app" (label app:
// 1000 values) and "shard" (label shard: 10000 values).
func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		"app":                labelIndexFunc("app"),
		"shard":              labelIndexFunc("shard"),
	})
}

// storeList returns object(i, base+i+1) for i in 0..N-1 as the []interface{} Replace takes.
func storeList(n, base int) []interface{} {
	out := make([]interface{}, n)
	for i := range out {
		out[i] = object(i, base+i+1)
	}
	return out
}

// storeReplace: with newIndexer (3 indexers) and two lists of the N objects built untimed (version
// 1: resourceVersion i+1, version 2: N+i+1), timed: create the indexer, Replace(version 1, "1"),
// then Replace(version 2, "2"). ops = 2N objects stored; extra.len = items afterwards (N).
func storeReplace(n int, t *timer) (int64, map[string]any) {
	l1 := storeList(n, 0)
	l2 := storeList(n, n)
	t.start()
	s := newIndexer()
	if err := s.Replace(l1, "1"); err != nil {
		panic(err)
	}
	if err := s.Replace(l2, "2"); err != nil {
		panic(err)
	}
	t.stop()
	return int64(2 * n), map[string]any{"len": len(s.ListKeys())}
}

// byIndexQuery returns query q of store_by_index: the indexer namespace, app, shard for q mod 3 =
// 0, 1, 2 and the value ns-<(q/3) mod 100>, app-<(q/3) mod 1000> or shard-<(q/3) mod 10000>.
func byIndexQuery(q int) (string, string) {
	j := q / 3
	switch q % 3 {
	case 0:
		return cache.NamespaceIndex, "ns-" + strconv.Itoa(j%100)
	case 1:
		return "app", "app-" + strconv.Itoa(j%1000)
	default:
		return "shard", "shard-" + strconv.Itoa(j%10000)
	}
}

// storeByIndex: newIndexer filled untimed with Replace(version 1 of the N objects); queries
// byIndexQuery(q) for q in 0..N-1 built untimed; timed: ByIndex for each query. With N = 100k a
// query returns 1000 (namespace), 100 (app) or 10 (shard) objects. ops = N queries;
// extra.items = total objects returned.
func storeByIndex(n int, t *timer) (int64, map[string]any) {
	s := newIndexer()
	if err := s.Replace(storeList(n, 0), "1"); err != nil {
		panic(err)
	}
	type query struct{ index, value string }
	qs := make([]query, n)
	for q := range qs {
		qs[q].index, qs[q].value = byIndexQuery(q)
	}
	items := 0
	t.start()
	for _, q := range qs {
		objs, err := s.ByIndex(q.index, q.value)
		if err != nil {
			panic(err)
		}
		items += len(objs)
	}
	t.stop()
	return int64(n), map[string]any{"items": items}
}
