package main

import (
	"testing"
	"time"
)

// The Rust side (xtask/bench-rs/src/workload.rs) asserts the same values.
func TestWorkloadMatchesRustSide(t *testing.T) {
	if got := key(1234); got != "ns-34/cm-1234" {
		t.Fatalf("key(1234) = %q", got)
	}
	rng := splitMix64{state: 0}
	if got := rng.next(); got != 0xe220a8397b1dcdaf {
		t.Fatalf("splitmix64 first value %#x", got)
	}
	if got := rng.next(); got != 0x6e789e6aa1b965f4 {
		t.Fatalf("splitmix64 second value %#x", got)
	}
	want := []time.Duration{229 * time.Millisecond, 107 * time.Millisecond, 639 * time.Millisecond}
	for i, d := range addAfterDelays(3) {
		if d != want[i] {
			t.Fatalf("addAfterDelays(3)[%d] = %v, want %v", i, d, want[i])
		}
	}
}
