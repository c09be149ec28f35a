//! Property test: random write/read sequences against `std::collections::VecDeque` as the model,
//! checking FIFO contents and the exact capacity policy after every step.

use std::collections::VecDeque;

use kcache_ring_buffer::{DEFAULT_RING_SIZE, Ring, RingGrowing, RingOptions};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Write(u32),
    Read,
    Drain,
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    // Writes are weighted so the buffers actually grow several times.
    let op = prop_oneof![
        6 => any::<u32>().prop_map(Op::Write),
        4 => Just(Op::Read),
        1 => Just(Op::Drain),
    ];
    prop::collection::vec(op, 0..600)
}

/// The capacity the growth policy must report after a write sequence, computed independently.
fn grown(cap: usize, len_before_write: usize) -> usize {
    if len_before_write < cap {
        cap
    } else if cap == 0 {
        DEFAULT_RING_SIZE
    } else {
        cap * 2
    }
}

proptest! {
    #[test]
    fn ring_growing_matches_vecdeque(initial in 0usize..40, ops in ops()) {
        let mut ring = RingGrowing::with_capacity(initial);
        let mut model = VecDeque::new();
        let mut cap = initial;
        for op in ops {
            match op {
                Op::Write(v) => {
                    cap = grown(cap, model.len());
                    ring.write_one(v);
                    model.push_back(v);
                }
                Op::Read => prop_assert_eq!(ring.read_one(), model.pop_front()),
                Op::Drain => {
                    let got: Vec<_> = ring.drain().collect();
                    let want: Vec<_> = model.drain(..).collect();
                    prop_assert_eq!(got, want);
                }
            }
            prop_assert_eq!(ring.len(), model.len());
            prop_assert_eq!(ring.is_empty(), model.is_empty());
            prop_assert_eq!(ring.capacity(), cap);
            prop_assert!(ring.len() <= ring.capacity());
            prop_assert_eq!(ring.peek(), model.front());
            prop_assert!(ring.iter().eq(model.iter()));
        }
    }

    #[test]
    fn ring_matches_vecdeque_and_shrinks(initial in 0usize..20, normal in 0usize..40, ops in ops()) {
        let mut ring = Ring::new(RingOptions { initial_size: initial, normal_size: normal });
        let mut model = VecDeque::new();
        let mut cap = initial;
        for op in ops {
            match op {
                Op::Write(v) => {
                    cap = grown(cap, model.len());
                    ring.write_one(v);
                    model.push_back(v);
                }
                Op::Read => {
                    prop_assert_eq!(ring.read_one(), model.pop_front());
                    if model.is_empty() && cap > normal {
                        cap = normal;
                    }
                }
                Op::Drain => {
                    let got: Vec<_> = ring.drain().collect();
                    let want: Vec<_> = model.drain(..).collect();
                    prop_assert_eq!(got, want);
                    if cap > normal {
                        cap = normal;
                    }
                }
            }
            prop_assert_eq!(ring.len(), model.len());
            prop_assert_eq!(ring.capacity(), cap);
        }
    }
}
