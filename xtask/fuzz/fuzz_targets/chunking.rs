//! How the byte-stream fuzz targets cut a body into chunks (shared with `#[path]`).

/// Cuts `body` into chunks of 1..=max bytes, the sizes drawn from a xorshift generator seeded
/// with `seed` (seed 0: one byte per chunk).
pub fn cut(seed: u8, body: &[u8]) -> Vec<&[u8]> {
    let max = usize::from(seed % 64) + 1;
    let mut state = u32::from(seed) | 0x9e37_0000;
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let n = if seed == 0 { 1 } else { (state as usize % max) + 1 }.min(rest.len());
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}
