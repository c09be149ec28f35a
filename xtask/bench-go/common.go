package main

import (
	"runtime"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Shared workload definitions. kcache-bench (xtask/bench-rs/src/workload.rs) mirrors every function
// here exactly; change both together.

// splitMix64 is the deterministic generator of every random choice in the scenarios (SplitMix64,
// seed given per scenario), so both sides draw the same sequence.
type splitMix64 struct{ state uint64 }

func (s *splitMix64) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// objectNamespace is the namespace of object i: "ns-<i mod 100>".
func objectNamespace(i int) string { return "ns-" + strconv.Itoa(i%100) }

// objectName is the name of object i: "cm-<i>".
func objectName(i int) string { return "cm-" + strconv.Itoa(i) }

// key is the workqueue / store key of item i, "<namespace>/<name>" as MetaNamespaceKeyFunc makes
// it: "ns-<i mod 100>/cm-<i>".
func key(i int) string { return objectNamespace(i) + "/" + objectName(i) }

// keys returns key(0) .. key(n-1).
func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = key(i)
	}
	return out
}

// object builds object i at resourceVersion rv: a *v1.ConfigMap with only ObjectMeta set:
// namespace objectNamespace(i), name objectName(i), resourceVersion strconv(rv) and three labels
// app=app-<i mod 1000>, shard=shard-<i mod 10000>, tier=tier-<i mod 3>. No data, no TypeMeta.
func object(i int, rv int) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace:       objectNamespace(i),
		Name:            objectName(i),
		ResourceVersion: strconv.Itoa(rv),
		Labels: map[string]string{
			"app":   "app-" + strconv.Itoa(i%1000),
			"shard": "shard-" + strconv.Itoa(i%10000),
			"tier":  "tier-" + strconv.Itoa(i%3),
		},
	}}
}

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
