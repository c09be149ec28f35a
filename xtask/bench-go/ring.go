package main

import "k8s.io/utils/buffer"

// ringInitialSize is the initial capacity of both rings: the size client-go's processorListener
// gives its pendingNotifications buffer (1024).
const ringInitialSize = 1024

// ringRounds is how many times ringWriteRead repeats its burst, so that the timed section lasts
// tens of milliseconds instead of a few (shorter ones measure the scheduler of a shared machine).
const ringRounds = 10

// ringWriteRead: 10 rounds, each creating a TypedRingGrowing[uint64] of initial size 1024, writing
// the values 0..N-1, then reading N values (a burst absorbed, then drained), all inside the timed
// section. ops = 20N (10 x (N writes + N reads)); extra.checksum = the wrapping sum of all values
// read (10 N(N-1)/2).
func ringWriteRead(n int, t *timer) (int64, map[string]any) {
	var sum uint64
	capacity := 0
	t.start()
	for round := 0; round < ringRounds; round++ {
		r := buffer.NewTypedRingGrowing[uint64](buffer.RingGrowingOptions{InitialSize: ringInitialSize})
		for i := 0; i < n; i++ {
			r.WriteOne(uint64(i))
		}
		for {
			v, ok := r.ReadOne()
			if !ok {
				break
			}
			sum += v
		}
		capacity = r.Cap()
	}
	t.stop()
	return int64(ringRounds * 2 * n), map[string]any{"checksum": sum, "capacity": capacity, "rounds": ringRounds}
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
