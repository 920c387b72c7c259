//! The benchmarks' I/O buffers: page-aligned, so that every file system under test
//! copies between page-aligned addresses.
//!
//! Where a buffer starts decides how fast a copy into it runs, on the kernel's side as
//! much as on libFS's. On the AMD EPYC (Zen 3) these benchmarks ran on, a 16 KiB copy
//! from a page-aligned source by glibc's memcpy ran at 2.8 GB/s when the destination
//! started 1 to 31 bytes past a page boundary, and at 17.5 to 20.1 GB/s at 0 and from
//! 32 bytes on (4 KiB copies alike; 1 KiB and 1 MiB copies, which glibc makes
//! otherwise, were not slowed). A 16 KiB `pread` from tmpfs ran at 2.1 GB/s against 5.8
//! to 6.3 (the kernel's copy to user space). glibc's malloc puts a buffer of 128 KiB or
//! more (the FileBench targets' 1 MiB I/O buffer) 16 bytes past a page boundary, and
//! smaller ones wherever its heap stands. So with buffers from `vec!`, a process's
//! first FileBench repetition on webproxy took up to twice as long as the next ones,
//! for tmpfs and Aerie alike: the benchmark measured the allocator, not the file
//! systems.
//!
//! Every system under test reads into and writes from the same kind of buffer, so the
//! choice favours none; page-aligned, they all copy at full speed.

use std::ops::{Deref, DerefMut};

/// The alignment of every buffer: a page.
pub const ALIGN: usize = 4096;

/// A byte buffer of fixed length whose first byte is page-aligned.
pub struct IoBuf {
    /// `len` bytes from `start`, with room before them to reach a page boundary.
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl IoBuf {
    /// A buffer of `len` bytes, each `fill`, written now so that its pages are
    /// faulted in before a timed phase uses them (`vec![0; n]` would take zeroed
    /// pages from the allocator and leave them untouched).
    pub fn new(len: usize, fill: u8) -> IoBuf {
        let room = len
            .checked_add(ALIGN - 1)
            .expect("an I/O buffer fits the address space");
        let mut raw = Vec::with_capacity(room);
        raw.resize(room, fill);
        let start = raw.as_ptr().align_offset(ALIGN);
        // A byte pointer can always be aligned (`align_offset` gives up only in const
        // evaluation), and the room reserved reaches the next page boundary.
        assert!(start < ALIGN);
        IoBuf { raw, start, len }
    }
}

impl Deref for IoBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.len]
    }
}

impl DerefMut for IoBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_buffer_starts_on_a_page_and_holds_what_it_was_filled_with() {
        // Sizes on both sides of glibc's mmap threshold, which place a `vec!` buffer
        // differently (16 bytes past a page, or anywhere in the heap).
        for len in [0, 1, 100, 4096, 16_384, 200_000, 1 << 20] {
            let mut b = IoBuf::new(len, 0x3c);
            assert_eq!(b.as_ptr() as usize % ALIGN, 0, "{len} bytes");
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0x3c));
            if let Some(last) = b.last_mut() {
                *last = 7;
                assert_eq!(b[len - 1], 7);
            }
        }
    }
}
