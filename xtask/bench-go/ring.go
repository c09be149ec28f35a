package main

import "k8s.io/utils/buffer"

// ringInitialSize is the initial capacity of both rings: the size client-go's processorListener
// gives its pendingNotifications buffer (1024).
const ringInitialSize = 1024

// ringWriteRead: create a TypedRingGrowing[uint64] of initial size 1024, write the values 0..N-1,
// then read N values, all inside the timed section (a burst absorbed, then drained). ops = 2N (N writes + N reads);
// extra.checksum = the wrapping sum of the values read (N(N-1)/2).
func ringWriteRead(n int, t *timer) (int64, map[string]any) {
	t.start()
	r := buffer.NewTypedRingGrowing[uint64](buffer.RingGrowingOptions{InitialSize: ringInitialSize})
	for i := 0; i < n; i++ {
		r.WriteOne(uint64(i))
	}
	var sum uint64
	for {
		v, ok := r.ReadOne()
		if !ok {
			break
		}
		sum += v
	}
	t.stop()
	return int64(2 * n), map[string]any{"checksum": sum, "capacity": r.Cap()}
}

// ringInterleaved: a TypedRingGrowing[uint64] of initial size 1024 holding a standing backlog of
// the 1024 values 0..1023 (written untimed), then N rounds of one write (value 1024+i) and one read
// (a listener that keeps up but is behind). ops = 2N; extra.checksum = the wrapping sum of the N
// values read (0..N-1).
func ringInterleaved(n int, t *timer) (int64, map[string]any) {
	r := buffer.NewTypedRingGrowing[uint64](buffer.RingGrowingOptions{InitialSize: ringInitialSize})
	for i := 0; i < ringInitialSize; i++ {
		r.WriteOne(uint64(i))
	}
	var sum uint64
	t.start()
	for i := 0; i < n; i++ {
		r.WriteOne(uint64(ringInitialSize + i))
		v, _ := r.ReadOne()
		sum += v
	}
	t.stop()
	return int64(2 * n), map[string]any{"checksum": sum}
}
