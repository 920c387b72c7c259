//! Copies made durable by the next fence with non-temporal stores.
//!
//! A store followed by a write-back instruction per line (`clwb`) first brings each
//! line into the cache (a read for ownership), then writes it back: two trips to
//! memory per line. A non-temporal store (`movntdq`) sends the line straight to memory
//! through a write-combining buffer, and the next `sfence` orders it as it orders the
//! write-backs, so a copy of whole lines needs no flush at all. This is what PMDK's
//! `pmem_memcpy_persist` does for all but small copies. `movntdq` is part of SSE2,
//! which every x86_64 CPU has, so no CPUID check is needed; on other architectures the
//! callers keep the ordinary store and flush ([`stream_available`] says which ran).

use pmlab_spine::LINE;

use crate::persist::PersistMode;

/// Whether this build stores whole lines non-temporally (x86_64), or falls back to an
/// ordinary store and a flush of each line.
pub fn stream_available() -> bool {
    cfg!(target_arch = "x86_64")
}

/// Copies `src` to `dst` with non-temporal stores, one 64-byte line at a time.
///
/// # Safety
/// `dst` must be aligned to a line and `[dst, dst + src.len())` writable memory of one
/// live mapping; `src.len()` must be a multiple of the line size.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn stream_lines(dst: *mut u8, src: &[u8]) {
    use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    debug_assert_eq!(dst as usize % LINE as usize, 0);
    debug_assert_eq!(src.len() % LINE as usize, 0);
    let mut i = 0;
    while i < src.len() {
        // SAFETY: both ranges are in bounds (the caller's contract); `dst + i` is
        // 16-byte aligned because `dst` is line-aligned and `i` a multiple of 16;
        // SSE2 is part of x86_64.
        unsafe {
            let v = _mm_loadu_si128(src.as_ptr().add(i).cast::<__m128i>());
            _mm_stream_si128(dst.add(i).cast::<__m128i>(), v);
        }
        i += 16;
    }
}

/// Copies `src` to `dst` with ordinary stores (the fallback; the caller flushes).
///
/// # Safety
/// As [`stream_lines`].
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn stream_lines(dst: *mut u8, src: &[u8]) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
}

/// Copies `src` to `dst` so that the calling thread's next store fence makes it
/// durable: the whole lines with [`stream_lines`] (non-temporal where available,
/// then nothing to flush), a partial line at either end by an ordinary store and a
/// write-back in `mode`. Returns the lines it wrote back or streamed, all of which are
/// charged to the SCM write model.
///
/// # Safety
/// `mode` must be a CPU flush mode this CPU supports, and `[dst, dst + src.len())`
/// writable memory of one live mapping that nothing else accesses meanwhile.
pub(crate) unsafe fn copy_streaming(mode: PersistMode, dst: *mut u8, src: &[u8]) -> u64 {
    let (head, body, _) = split_lines(dst as usize, src.len());
    let (h, rest) = src.split_at(head);
    let (b, t) = rest.split_at(body);
    let mut lines = 0;
    // SAFETY (all three): the pieces lie in the caller's range, in order; the body
    // starts on a line and is whole lines.
    unsafe {
        lines += store_and_flush(mode, dst, h);
        if !b.is_empty() {
            if stream_available() {
                stream_lines(dst.add(head), b);
                let n = (body as u64) / LINE;
                crate::scm_model::charge_lines(n);
                lines += n;
            } else {
                lines += store_and_flush(mode, dst.add(head), b);
            }
        }
        lines += store_and_flush(mode, dst.add(head + body), t);
    }
    lines
}

/// Stores `src` at `dst` and writes its lines back in `mode`; the lines it spans.
///
/// # Safety
/// As [`copy_streaming`].
unsafe fn store_and_flush(mode: PersistMode, dst: *mut u8, src: &[u8]) -> u64 {
    if src.is_empty() {
        return 0;
    }
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len());
        crate::persist::flush_lines(mode, dst, src.len());
    }
    let start = dst as u64 / LINE;
    (dst as u64 + src.len() as u64).div_ceil(LINE) - start
}

/// Splits a copy of `len` bytes to address `at` into a head before the first whole line,
/// the whole lines, and a tail after them: the byte lengths of the three.
pub(crate) fn split_lines(at: usize, len: usize) -> (usize, usize, usize) {
    let line = LINE as usize;
    let end = at + len;
    let body_start = at.next_multiple_of(line).min(end);
    let body_end = (end / line * line).max(body_start);
    (body_start - at, body_end - body_start, end - body_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_the_copy_and_the_body_is_whole_lines() {
        for at in [0usize, 1, 63, 64, 65, 4095, 4096] {
            for len in [0usize, 1, 63, 64, 65, 127, 128, 129, 4096, 5000] {
                let (h, b, t) = split_lines(at, len);
                assert_eq!(h + b + t, len, "at {at} len {len}");
                assert_eq!(b % 64, 0, "at {at} len {len}");
                if b > 0 {
                    assert_eq!((at + h) % 64, 0, "at {at} len {len}");
                }
                assert!(h < 64 && t < 64 || b == 0, "at {at} len {len}");
            }
        }
    }
}
