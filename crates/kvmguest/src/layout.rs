//! Guest physical memory and the page tables pmlab writes into it.
//!
//! ```text
//! 0x0000_1000  PML4          0x0000_2000  PDPT        0x0000_3000  PD of 0..1 GiB
//! 0x0000_4000  PD of the working set (1 GiB..2 GiB)   0x0000_5000.. its page tables
//! 0x0010_0000  code          0x0020_0000  stack top (grows down)
//! 0x0040_0000  the access offsets of Figure 6 (u64 each), up to 28 MiB
//! 0x0200_0000  the working set's frames (4 KiB each)
//! ```
//! The first 32 MiB are identity-mapped by global 2 MiB pages (CR4.PGE), so a CR3 write
//! flushes only the working set's translations.

/// Page-table root.
pub const PML4: u64 = 0x1000;
const PDPT: u64 = 0x2000;
const PD_LOW: u64 = 0x3000;
const PD_WS: u64 = 0x4000;
const PT_WS: u64 = 0x5000;
/// Guest address of the code.
pub const CODE: u64 = 0x10_0000;
/// Initial stack pointer.
pub const STACK_TOP: u64 = 0x20_0000;
/// Guest address of the offsets array.
pub const OFFSETS: u64 = 0x40_0000;
/// Most offsets the array holds.
pub const MAX_OFFSETS: u64 = (FRAMES - OFFSETS) / 8;
/// First frame of the working set.
pub const FRAMES: u64 = 0x200_0000;
/// Virtual address of the working set.
pub const WS_VA: u64 = 1 << 30;
/// Largest working set: one page directory of page tables (1 GiB would need 512 of
/// them; 64 MiB, 16384 pages, is far beyond any TLB).
pub const MAX_PAGES: u64 = 16384;

const PRESENT_RW: u64 = 0b11;
const LARGE: u64 = 1 << 7;
const GLOBAL: u64 = 1 << 8;

/// Bytes of guest memory for a working set of `pages`.
pub fn memory_bytes(pages: u64) -> u64 {
    FRAMES + pages * 4096
}

/// Writes the page tables for a working set of `pages` into guest memory `mem`.
pub fn write_tables(mem: &mut [u8], pages: u64) {
    let mut put =
        |at: u64, v: u64| mem[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
    put(PML4, PDPT | PRESENT_RW);
    put(PDPT, PD_LOW | PRESENT_RW);
    put(PDPT + 8, PD_WS | PRESENT_RW);
    for i in 0..(FRAMES >> 21) {
        put(PD_LOW + 8 * i, (i << 21) | PRESENT_RW | LARGE | GLOBAL);
    }
    for t in 0..pages.div_ceil(512) {
        put(PD_WS + 8 * t, (PT_WS + 4096 * t) | PRESENT_RW);
    }
    for p in 0..pages {
        put(PT_WS + 8 * p, (FRAMES + 4096 * p) | PRESENT_RW);
    }
}
