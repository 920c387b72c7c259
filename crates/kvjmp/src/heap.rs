//! The store's allocator, all of whose state is in the segment (the paper replaced
//! Redis's allocator with one on the shared segment): power-of-two size classes, one
//! free list per class whose heads are in the root, and a bump pointer. Every change
//! is a transactional write, so an allocation commits or vanishes with the SET that
//! made it.
//!
//! pmlab-tx's `Allocator` is not used here: it mirrors every unit's state in the
//! process that opened it, and with many writer processes each would have to reload
//! that mirror whenever another had written.
//!
//! A block is `2^class` bytes: an 8-byte header (`BLOCK_TAG << 8 | class`), then the
//! payload. A free block's first payload word is the next free block of its class.

use pmlab_spine::Addr;
use pmlab_tx::{TxError, TxMemory};

use crate::layout::{Header, root};

/// Smallest block class (32 bytes).
pub const MIN_CLASS: u32 = 5;
/// Largest block class (1 TiB: more than any segment).
pub const MAX_CLASS: u32 = 40;
/// The tag in every block header's upper bytes.
pub const BLOCK_TAG: u64 = 0x00b1_0c4b_5600;

/// A transaction over the segment, as the store's structures need it: transactional
/// reads and writes, and zeroing of a block the transaction has just allocated.
pub trait SegTx: TxMemory {
    /// Zeroes `[addr, addr + len)` of a block this transaction allocated (beyond its
    /// first payload word, which the transaction writes): the bytes are unreachable
    /// unless the transaction commits, so they need not be logged — only made durable
    /// before the commit (a flush the commit's first fence orders).
    fn zero_unlogged(&mut self, addr: Addr, len: u64) -> Result<(), TxError>;
}

/// The block header word of class `class`.
pub fn block_word(class: u32) -> u64 {
    BLOCK_TAG << 8 | u64::from(class)
}

/// The class of a header word, if it is one.
pub fn class_of(word: u64) -> Option<u32> {
    let class = (word & 0xff) as u32;
    (word >> 8 == BLOCK_TAG && (MIN_CLASS..=MAX_CLASS).contains(&class)).then_some(class)
}

/// The class whose blocks hold `payload` bytes.
pub fn class_for(payload: u64) -> u32 {
    let total = payload + 8;
    (64 - (total - 1).leading_zeros()).max(MIN_CLASS)
}

/// Why an allocation failed.
#[derive(Debug)]
pub enum AllocError {
    /// No room for a block of this many bytes.
    Full(u64),
    /// A free-list block without a valid header (corruption).
    BadFreeBlock(Addr),
    /// The transaction refused.
    Tx(TxError),
}

impl From<TxError> for AllocError {
    fn from(e: TxError) -> Self {
        AllocError::Tx(e)
    }
}

/// Allocates a block whose payload holds `payload` bytes; returns the block's offset.
pub fn alloc<T: SegTx>(tx: &mut T, h: &Header, payload: u64) -> Result<Addr, AllocError> {
    let class = class_for(payload);
    let head_at = h.root + root::free(class);
    let head = tx.tx_read_u64(head_at)?;
    if head != 0 {
        if head < h.heap || head + (1 << class) > h.size {
            return Err(AllocError::BadFreeBlock(head));
        }
        if class_of(tx.tx_read_u64(head)?) != Some(class) {
            return Err(AllocError::BadFreeBlock(head));
        }
        let next = tx.tx_read_u64(head + 8)?;
        tx.tx_write_u64(head_at, next)?;
        return Ok(head);
    }
    let bump = tx.tx_read_u64(h.root + root::BUMP)?;
    let end = bump.checked_add(1 << class).filter(|&e| e <= h.size);
    let Some(end) = end else {
        return Err(AllocError::Full(1 << class));
    };
    tx.tx_write_u64(h.root + root::BUMP, end)?;
    tx.tx_write_u64(bump, block_word(class))?;
    Ok(bump)
}

/// Returns block `block` to its class's free list.
pub fn free<T: SegTx>(tx: &mut T, h: &Header, block: Addr) -> Result<(), AllocError> {
    let class = class_of(tx.tx_read_u64(block)?).ok_or(AllocError::BadFreeBlock(block))?;
    let head_at = h.root + root::free(class);
    let head = tx.tx_read_u64(head_at)?;
    tx.tx_write_u64(block + 8, head)?;
    tx.tx_write_u64(head_at, block)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_fit_their_payloads() {
        assert_eq!(class_for(1), 5);
        assert_eq!(class_for(24), 5);
        assert_eq!(class_for(25), 6);
        assert_eq!(class_for(56), 6);
        assert_eq!(class_for(4096 - 8), 12);
        for p in 1..5000u64 {
            let c = class_for(p);
            assert!((1u64 << c) >= p + 8);
            assert!(c == MIN_CLASS || (1u64 << (c - 1)) < p + 8);
        }
        assert_eq!(class_of(block_word(7)), Some(7));
        assert_eq!(class_of(7), None);
    }
}
