// Command bench-go runs kcache's benchmark scenarios on the client-go side: the same workloads that
// xtask/bench-rs (`kcache-bench`) runs with kcache, std and kube-runtime, so that `cargo xtask bench`
// can put the sides next to each other.
//
// Usage:
//
//	bench-go -scenario NAME [-n N] [-quick] [-server URL | -kubeconfig PATH]
//	bench-go -list
//
// It prints one JSON line per result on stdout:
//
//	{"scenario":"ring_write_read","side":"client-go","ops":1000000,"ns_per_op":3.1,
//	 "ops_per_sec":3.2e8,"cpu_seconds":0.004,"peak_rss_bytes":12345678,
//	 "bytes_per_item":8.1,"extra":{"n":1000000,"checksum":499999500000}}
//
// or, for a scenario this side cannot run, {"scenario":..,"side":"client-go","error":".."} and exit
// status 2.
//
// What is measured: every scenario builds its inputs (keys, objects, delays) first, untimed, then
// times one section. ns_per_op and ops_per_sec are wall time over that section divided by ops;
// cpu_seconds is user+system CPU time of the whole process (getrusage RUSAGE_SELF delta, so it
// includes the Go garbage collector and every goroutine) over the same section; peak_rss_bytes is
// getrusage's ru_maxrss at the end (the process-wide peak, which is why the harness runs exactly
// one scenario per process); bytes_per_item is the growth of ru_maxrss during the timed section
// divided by ops (0 when the section did not raise the peak). extra.checksum, where present, is a
// value that the Rust side computes identically, to show that both sides did the same work.
//
// With KCACHE_BENCH_PROTOBUF=1 the informer and reflector scenarios speak protobuf (protobuf.go)
// and the lines say "side":"client-go-protobuf"; extra.response_types counts the responses by
// media type.
//
// The Go runtime runs with its defaults (GOGC=100, GOMAXPROCS = number of CPUs) unless the
// environment says otherwise.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"syscall"
	"time"
)

// scenario is one workload. run builds its inputs, calls t.start() right before the measured
// section and t.stop() right after it, and returns the number of operations in the section and
// scenario-specific extra fields.
type scenario struct {
	defaultN int
	quickN   int
	run      func(n int, t *timer) (ops int64, extra map[string]any)
	impl     string // the Go type measured, reported as extra.impl
}

// scenarios maps the scenario names shared with kcache-bench to their client-go implementations.
var scenarios = map[string]scenario{
	"ring_write_read":         {1_000_000, 1_000_000, ringWriteRead, "k8s.io/utils/buffer.TypedRingGrowing[uint64]"},
	"ring_interleaved":        {10_000_000, 10_000_000, ringInterleaved, "k8s.io/utils/buffer.TypedRingGrowing[uint64]"},
	"workqueue_single":        {1_000_000, 200_000, workqueueSingle, "k8s.io/client-go/util/workqueue.Typed[string]"},
	"workqueue_contended":     {1_000_000, 200_000, workqueueContended, "k8s.io/client-go/util/workqueue.Typed[string]"},
	"workqueue_coalesce":      {1_000, 1_000, workqueueCoalesce, "k8s.io/client-go/util/workqueue.Typed[string]"},
	"workqueue_add_after":     {1_000_000, 200_000, workqueueAddAfter, "k8s.io/client-go/util/workqueue.TypedDelayingInterface[string]"},
	"rate_limiter_when":       {1_000_000, 200_000, rateLimiterWhen, "k8s.io/client-go/util/workqueue.DefaultTypedControllerRateLimiter[string]"},
	"priorityqueue_single":    {1_000_000, 200_000, priorityQueueSingle, "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.PriorityQueue[string]"},
	"priorityqueue_contended": {1_000_000, 200_000, priorityQueueContended, "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.PriorityQueue[string]"},
	"delta_fifo":              {100_000, 20_000, deltaFIFO, "k8s.io/client-go/tools/cache.DeltaFIFO"},
	"real_fifo":               {100_000, 20_000, realFIFO, "k8s.io/client-go/tools/cache.RealFIFO"},
	"store_replace":           {100_000, 20_000, storeReplace, "k8s.io/client-go/tools/cache.Indexer (threadSafeMap, 3 indexers)"},
	"store_by_index":          {100_000, 20_000, storeByIndex, "k8s.io/client-go/tools/cache.Indexer (threadSafeMap, 3 indexers)"},
	// Against `kcache-bench serve` (-server URL); N is the number of ConfigMaps loaded into it.
	"informer_synced_list_10k":       {10_000, 10_000, informerSynced(false), informerImpl},
	"informer_synced_list_50k":       {50_000, 50_000, informerSynced(false), informerImpl},
	"informer_synced_watchlist_10k":  {10_000, 10_000, informerSynced(true), informerImpl},
	"informer_synced_watchlist_50k":  {50_000, 50_000, informerSynced(true), informerImpl},
	"event_fanout_3_handlers":        {100_000, 20_000, eventFanout, informerImpl + " (3 handlers)"},
	"informer_memory_kube_rs":        {10_000, 10_000, informerMemory, informerImpl},
	"reflector_synced_list_50k":      {50_000, 50_000, reflectorSynced(false), reflectorImpl},
	"reflector_synced_watchlist_50k": {50_000, 50_000, reflectorSynced(true), reflectorImpl},
	"reflector_event_throughput":     {200_000, 50_000, reflectorEventThroughput, reflectorImpl},
}

const informerImpl = "k8s.io/client-go/tools/cache.SharedIndexInformer"

const reflectorImpl = "k8s.io/client-go/tools/cache.Reflector into cache.NewStore(MetaNamespaceKeyFunc)"

type result struct {
	Scenario     string         `json:"scenario"`
	Side         string         `json:"side"`
	Ops          int64          `json:"ops"`
	NsPerOp      float64        `json:"ns_per_op"`
	OpsPerSec    float64        `json:"ops_per_sec"`
	CPUSeconds   float64        `json:"cpu_seconds"`
	PeakRSSBytes int64          `json:"peak_rss_bytes"`
	BytesPerItem *float64       `json:"bytes_per_item,omitempty"`
	Extra        map[string]any `json:"extra,omitempty"`
}

type errorLine struct {
	Scenario string `json:"scenario"`
	Side     string `json:"side"`
	Error    string `json:"error"`
}

func main() {
	name := flag.String("scenario", "", "scenario to run (see -list)")
	n := flag.Int("n", 0, "workload size N (0: the scenario's default, or its quick size with -quick)")
	quick := flag.Bool("quick", false, "use the scenario's reduced N")
	list := flag.Bool("list", false, "print the scenario names and their default and quick N")
	flag.StringVar(&serverURL, "server", "", "URL of the `kcache-bench serve` process (informer scenarios)")
	flag.StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig of a real API server (informer scenarios with `cargo xtask bench --cluster local`)")
	flag.Parse()

	if *list {
		names := make([]string, 0, len(scenarios))
		for k := range scenarios {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Printf("%s\t%d\t%d\n", k, scenarios[k].defaultN, scenarios[k].quickN)
		}
		return
	}

	sc, ok := scenarios[*name]
	if !ok {
		emitError(*name, fmt.Sprintf("unknown scenario %q on this side (see -list)", *name))
		os.Exit(2)
	}
	size := *n
	if size <= 0 {
		size = sc.defaultN
		if *quick {
			size = sc.quickN
		}
	}

	var t timer
	ops, extra := sc.run(size, &t)
	if !t.stopped {
		emitError(*name, "internal error: the scenario did not stop its timer")
		os.Exit(1)
	}
	if extra == nil {
		extra = map[string]any{}
	}
	extra["n"] = size
	extra["wall_seconds"] = t.wall.Seconds()
	extra["gomaxprocs"] = gomaxprocs()
	extra["impl"] = sc.impl
	if types := responseTypeCounts(); len(types) > 0 {
		extra["response_types"] = types
	}

	peak := maxRSS()
	r := result{
		Scenario:     *name,
		Side:         sideName(),
		Ops:          ops,
		NsPerOp:      float64(t.wall.Nanoseconds()) / float64(ops),
		OpsPerSec:    float64(ops) / t.wall.Seconds(),
		CPUSeconds:   t.cpu,
		PeakRSSBytes: peak,
		Extra:        extra,
	}
	grown := float64(t.rssAfter-t.rssBefore) / float64(ops)
	r.BytesPerItem = &grown
	out, err := json.Marshal(r)
	if err != nil {
		emitError(*name, err.Error())
		os.Exit(1)
	}
	fmt.Println(string(out))
}

func emitError(name, msg string) {
	out, _ := json.Marshal(errorLine{Scenario: name, Side: sideName(), Error: msg})
	fmt.Println(string(out))
}

// timer measures one section: wall time, process CPU time and growth of the peak RSS.
type timer struct {
	startWall time.Time
	startCPU  float64
	rssBefore int64
	rssAfter  int64
	wall      time.Duration
	cpu       float64
	started   bool
	stopped   bool
}

func (t *timer) start() {
	t.rssBefore = maxRSS()
	t.startCPU = cpuSeconds()
	t.started = true
	t.startWall = time.Now()
}

func (t *timer) stop() {
	t.wall = time.Since(t.startWall)
	t.cpu = cpuSeconds() - t.startCPU
	t.rssAfter = maxRSS()
	t.stopped = t.started
}

func rusage() syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru
}

func cpuSeconds() float64 {
	ru := rusage()
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// maxRSS returns the process's peak resident set size in bytes (Linux reports ru_maxrss in KiB).
func maxRSS() int64 {
	return rusage().Maxrss * 1024
}
