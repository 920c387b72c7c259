//! Little-endian field access in byte slices, for log and allocator encodings.

/// The `u64` at `off` in `b`, or `None` past the end.
pub(crate) fn get_u64(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(8)?)?;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

/// The `u32` at `off` in `b`, or `None` past the end.
pub(crate) fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes(s.try_into().ok()?))
}

/// Stores `v` at `off` in `b` (which must be long enough).
pub(crate) fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// Stores `v` at `off` in `b` (which must be long enough).
pub(crate) fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// `n` rounded up to a multiple of 8.
pub(crate) fn pad8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}
