//! Decodes fuzzer bytes into a FIFO operation sequence (the proptests' `op_strategy`, for
//! libFuzzer): keys from the model's four, values 0..100, replace lists of up to 6 objects.

use arbitrary::{Result, Unstructured};

use kcache_test_support::fifo_model::{KEYS, Op};

/// At most this many operations per input: the models are quadratic, and longer runs find
/// nothing shorter ones do not.
const MAX_OPS: usize = 200;

fn key(u: &mut Unstructured<'_>) -> Result<usize> {
    u.choose_index(KEYS.len())
}

fn val(u: &mut Unstructured<'_>) -> Result<i64> {
    Ok(i64::from(u.int_in_range(0u8..=99)?))
}

fn op(u: &mut Unstructured<'_>) -> Result<Op> {
    Ok(match u.int_in_range(0u8..=13)? {
        0..=2 => Op::Add(key(u)?, val(u)?),
        3..=5 => Op::Update(key(u)?, val(u)?),
        6..=7 => Op::Delete(key(u)?, val(u)?),
        8 => {
            let n = u.int_in_range(0u8..=6)?;
            let mut list = Vec::with_capacity(n.into());
            for _ in 0..n {
                list.push((key(u)?, val(u)?));
            }
            Op::Replace(list)
        }
        9 => Op::Resync,
        _ => Op::Pop,
    })
}

/// As many operations as the input holds (up to [`MAX_OPS`]); a truncated last one is dropped.
pub(crate) fn ops(u: &mut Unstructured<'_>) -> Vec<Op> {
    let mut out = Vec::new();
    while !u.is_empty() && out.len() < MAX_OPS {
        match op(u) {
            Ok(o) => out.push(o),
            Err(_) => break,
        }
    }
    out
}
