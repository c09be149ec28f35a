package main

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// The queues are unnamed (client-go: TypedQueueConfig{} without Name; controller-runtime: name "")
// so neither side pays for metrics. Keys are the strings key(i) = "ns-<i mod 100>/cm-<i>", built
// before the timed section.

// queue is what the add/get/done scenarios need from a client-go or controller-runtime queue.
// add(i) adds key(i) (the keys are the ks slice given to the adapter).
type queue interface {
	add(i int)
	Get() (item string, shutdown bool)
	Done(item string)
	ShutDown()
}

// workqueueSingle: on one goroutine, Add the N distinct keys key(0..N-1) to a fresh
// workqueue.NewTyped[string](), then N times Get + Done. ops = N (one add/get/done cycle each);
// extra.processed = items got.
func workqueueSingle(n int, t *timer) (int64, map[string]any) {
	ks := keys(n)
	t.start()
	q := &wq{workqueue.NewTyped[string](), ks}
	processed := singleAddGetDone(q, ks)
	t.stop()
	q.ShutDown()
	return int64(n), map[string]any{"processed": processed}
}

func singleAddGetDone(q queue, ks []string) int {
	for i := range ks {
		q.add(i)
	}
	processed := 0
	for range ks {
		item, shutdown := q.Get()
		if shutdown {
			break
		}
		q.Done(item)
		processed++
	}
	return processed
}

// workqueueContended: 4 producer goroutines and 4 worker goroutines on one
// workqueue.NewTyped[string](). Producer p (0..3) adds the keys key(i) for i = p, p+4, p+8, ... < N
// (all N keys distinct, so nothing coalesces); each worker loops Get + Done. The timed section runs
// from starting the goroutines until the N-th Done; then the queue is shut down. ops = N.
func workqueueContended(n int, t *timer) (int64, map[string]any) {
	ks := keys(n)
	t.start()
	q := &wq{workqueue.NewTyped[string](), ks}
	processed := contendedAddGetDone(q, ks, 4, 4)
	t.stop()
	return int64(n), map[string]any{"processed": processed, "producers": 4, "workers": 4}
}

// contendedAddGetDone runs the contended workload and returns the number of items processed. The
// worker that completes the N-th item shuts the queue down, which releases the others.
func contendedAddGetDone(q queue, ks []string, producers, workers int) int64 {
	n := int64(len(ks))
	var processed atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := p; i < len(ks); i += producers {
				q.add(i)
			}
		}(p)
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				q.Done(item)
				if processed.Add(1) == n {
					q.ShutDown()
					return
				}
			}
		}()
	}
	wg.Wait()
	return processed.Load()
}

// workqueueCoalesce: N = number of keys (default 1000). On one goroutine, N rounds, each adding
// key(0..N-1) to a fresh workqueue.NewTyped[string]() (so N*N adds, all but the first N of which
// coalesce into an item already queued), then Get + Done until the queue is empty. ops = N*N
// adds; extra.processed = items got (N when coalescing works).
func workqueueCoalesce(n int, t *timer) (int64, map[string]any) {
	ks := keys(n)
	t.start()
	q := workqueue.NewTyped[string]()
	for round := 0; round < n; round++ {
		for _, k := range ks {
			q.Add(k)
		}
	}
	processed := 0
	for q.Len() > 0 {
		item, _ := q.Get()
		q.Done(item)
		processed++
	}
	t.stop()
	q.ShutDown()
	return int64(n) * int64(n), map[string]any{"processed": processed}
}

// addAfterDelays returns the N delays of the add_after scenario: 1 + (splitmix64(seed 9) mod 1000)
// milliseconds, i.e. uniform over 1ms..1000ms.
func addAfterDelays(n int) []time.Duration {
	rng := splitMix64{state: 9}
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(1+rng.next()%1000) * time.Millisecond
	}
	return out
}

// workqueueAddAfter: a fresh workqueue.NewTypedDelayingQueue[string](); one worker goroutine loops
// Get + Done from the start; the main goroutine calls AddAfter(key(i), delay(i)) for i in 0..N-1
// with the delays of addAfterDelays. The timed section ends at the N-th Done (so it lasts at least
// the longest delay, 1s: compare cpu_seconds and peak RSS, not throughput). ops = N;
// extra.add_seconds = wall time of the AddAfter loop alone.
func workqueueAddAfter(n int, t *timer) (int64, map[string]any) {
	ks := keys(n)
	delays := addAfterDelays(n)
	t.start()
	q := workqueue.NewTypedDelayingQueue[string]()
	var wg sync.WaitGroup
	var processed int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for processed < int64(n) {
			item, shutdown := q.Get()
			if shutdown {
				return
			}
			q.Done(item)
			processed++
		}
	}()
	addStart := time.Now()
	for i, k := range ks {
		q.AddAfter(k, delays[i])
	}
	addSeconds := time.Since(addStart).Seconds()
	wg.Wait()
	t.stop()
	q.ShutDown()
	return int64(n), map[string]any{"processed": processed, "add_seconds": addSeconds}
}

// rateLimiterWhen: workqueue.DefaultTypedControllerRateLimiter[string]() (the max of a per-item
// exponential limiter, 5ms base and 1000s cap, and a 10 qps / burst 100 token bucket); N calls
// When(key(i mod 1000)) for i in 0..N-1, no Forget. ops = N; extra.checksum = the sum over all
// calls of the returned delay in whole seconds, which depends on the wall clock through the token
// bucket, so it is informative only.
func rateLimiterWhen(n int, t *timer) (int64, map[string]any) {
	ks := keys(1000)
	rl := workqueue.DefaultTypedControllerRateLimiter[string]()
	var sum int64
	t.start()
	for i := 0; i < n; i++ {
		sum += int64(rl.When(ks[i%1000]) / time.Second)
	}
	t.stop()
	return int64(n), map[string]any{"delay_seconds_sum": sum}
}

// priority is the priority of item i in the priority queue scenarios: i mod 4.
func priority(i int) int { return i % 4 }

// wq adapts client-go's workqueue: add(i) is Add(key(i)).
type wq struct {
	*workqueue.Typed[string]
	ks []string
}

func (w *wq) add(i int) { w.Add(w.ks[i]) }

// pq adapts controller-runtime's priority queue: add(i) is AddWithOpts(Priority: priority(i)) of
// key(i).
type pq struct {
	priorityqueue.PriorityQueue[string]
	ks []string
}

func (p *pq) add(i int) {
	pr := priority(i)
	p.AddWithOpts(priorityqueue.AddOpts{Priority: &pr}, p.ks[i])
}

// priorityQueueSingle: workqueueSingle on controller-runtime's priorityqueue.New[string]("")
// (no metrics), each key(i) added with AddWithOpts(Priority: i mod 4). ops = N.
func priorityQueueSingle(n int, t *timer) (int64, map[string]any) {
	ks := keys(n)
	t.start()
	p := &pq{priorityqueue.New[string](""), ks}
	processed := singleAddGetDone(p, ks)
	t.stop()
	p.ShutDown()
	return int64(n), map[string]any{"processed": processed}
}

// priorityQueueContended: workqueueContended (4 producers x 4 workers) on controller-runtime's
// priority queue, priorities as in priorityQueueSingle. ops = N.
func priorityQueueContended(n int, t *timer) (int64, map[string]any) {
	ks := keys(n)
	t.start()
	p := &pq{priorityqueue.New[string](""), ks}
	processed := contendedAddGetDone(p, ks, 4, 4)
	t.stop()
	return int64(n), map[string]any{"processed": processed, "producers": 4, "workers": 4}
}
