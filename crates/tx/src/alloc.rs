//! A crash-consistent persistent allocator: fixed-size units, two state bits per unit,
//! and a one-line intent record that makes each allocation or free atomic together
//! with the pointer slot that owns it.
//!
//! # Layout (at `base`, line-aligned)
//!
//! | offset | size | field |
//! |-------:|-----:|-------|
//! |      0 |    8 | `magic` `PMALLOC1` |
//! |      8 |    8 | `unit`: bytes per unit (a power of two, at least 8) |
//! |     16 |    8 | `units`: units in the heap |
//! |     24 |    8 | `states_off`: offset of the state array |
//! |     32 |    8 | `heap_off`: offset of the heap (line-aligned) |
//! |     40 |    4 | `crc`: CRC-32 of bytes 0..40 |
//! |     64 |   40 | intent: `op`, `first`, `count`, `slot`, `crc` |
//! |    128 |    … | state array: 2 bits per unit (free, head, continuation), 32 per word |
//! |   heap |    … | the units |
//!
//! # Protocol: allocation and free are three fences each
//!
//! As in PMDK's atomic API (`pmemobj_alloc(dest)`), an extent always has an owner: the
//! persistent slot the caller names. An operation
//! 1. writes the intent (`op`, extent, slot, checksum) and persists it (**fence**);
//! 2. sets the extent's states and the slot (the new pointer, or 0 for a free) and
//!    persists both (**fence**);
//! 3. clears the intent's `op` word and persists it (**fence**).
//!
//! Recovery redoes a checksum-valid intent — step 2 is idempotent — and clears it. So
//! after any crash an extent is allocated exactly when a slot points to it: no leak,
//! no double allocation. A torn intent (crash inside step 1) fails its checksum, and
//! then step 2 had not begun.

use pmlab_spine::{Addr, LINE, Memory};

use crate::codec::{get_u32, get_u64, put_u32, put_u64};
use crate::error::TxError;
use crate::fault::{Fault, FaultPlan};
use crate::lines::LineSet;
use crate::txmem::TxMemory;

/// The magic of an allocator header.
pub const ALLOC_MAGIC: u64 = u64::from_le_bytes(*b"PMALLOC1");
const INTENT_OFF: u64 = LINE;
const STATES_OFF: u64 = 2 * LINE;
const OP_NONE: u64 = 0;
const OP_ALLOC: u64 = 1;
const OP_FREE: u64 = 2;

/// The state of one unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitState {
    /// Not allocated.
    Free = 0,
    /// First unit of an allocated extent.
    Head = 1,
    /// A later unit of an allocated extent.
    Continuation = 2,
}

impl UnitState {
    fn from_bits(b: u64) -> Option<UnitState> {
        match b {
            0 => Some(UnitState::Free),
            1 => Some(UnitState::Head),
            2 => Some(UnitState::Continuation),
            _ => None,
        }
    }
}

/// An intent record: an operation in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intent {
    /// `true` for an allocation, `false` for a free.
    pub alloc: bool,
    /// First unit of the extent.
    pub first: u64,
    /// Units in the extent.
    pub count: u64,
    /// The slot that receives the pointer (or 0).
    pub slot: Addr,
}

/// Encodes an intent (40 bytes).
pub fn encode_intent(i: &Intent) -> [u8; 40] {
    let mut b = [0u8; 40];
    put_u64(&mut b, 0, if i.alloc { OP_ALLOC } else { OP_FREE });
    put_u64(&mut b, 8, i.first);
    put_u64(&mut b, 16, i.count);
    put_u64(&mut b, 24, i.slot);
    let crc = crc32fast::hash(&b[0..32]);
    put_u32(&mut b, 32, crc);
    b
}

/// Decodes an intent: `None` for no operation or a torn/corrupted record. Never panics.
pub fn decode_intent(b: &[u8]) -> Option<Intent> {
    let op = get_u64(b, 0)?;
    if op != OP_ALLOC && op != OP_FREE {
        return None;
    }
    if get_u32(b, 32)? != crc32fast::hash(b.get(0..32)?) {
        return None;
    }
    Some(Intent {
        alloc: op == OP_ALLOC,
        first: get_u64(b, 8)?,
        count: get_u64(b, 16)?,
        slot: get_u64(b, 24)?,
    })
}

/// What [`Allocator::check`] found in a consistent allocator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocReport {
    /// Allocated extents.
    pub extents: u64,
    /// Units in allocated extents.
    pub used_units: u64,
    /// Free units.
    pub free_units: u64,
}

/// An inconsistency found by [`Allocator::check`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocCheckError {
    /// The memory refused an access.
    #[error(transparent)]
    Access(#[from] pmlab_spine::SpineError),
    /// The intent record is still live (recovery did not run or did not finish).
    #[error("intent record at {0:#x} is live")]
    LiveIntent(Addr),
    /// A state value that means nothing.
    #[error("unit {unit}: state bits 0b11 are invalid")]
    InvalidState {
        /// The unit.
        unit: u64,
    },
    /// A continuation unit with no extent before it.
    #[error("unit {unit}: continuation without a head")]
    OrphanContinuation {
        /// The unit.
        unit: u64,
    },
    /// A slot points somewhere that is not an extent's head.
    #[error("slot {slot:#x} points to {ptr:#x}, which is not an allocated extent")]
    DanglingSlot {
        /// The slot.
        slot: Addr,
        /// Its pointer.
        ptr: Addr,
    },
    /// Two slots own the same extent.
    #[error("extent {ptr:#x} is owned by slots {first:#x} and {second:#x}")]
    DoubleOwner {
        /// The extent.
        ptr: Addr,
        /// One owner.
        first: Addr,
        /// The other.
        second: Addr,
    },
    /// An allocated extent no slot owns.
    #[error("extent {ptr:#x} ({units} units) is allocated but no slot owns it: a leak")]
    Leak {
        /// The extent.
        ptr: Addr,
        /// Its length in units.
        units: u64,
    },
}

/// A persistent allocator (volatile handle; the truth is in memory, mirrored here).
#[derive(Clone, Debug)]
pub struct Allocator {
    base: Addr,
    unit: u64,
    units: u64,
    heap: Addr,
    states: Vec<UnitState>,
    hint: u64,
    faults: FaultPlan,
}

impl Allocator {
    /// Formats `[base, base + len)` with units of `unit` bytes (one persist per line
    /// group; the heap's contents are not touched).
    pub fn format<M: Memory>(
        mem: &mut M,
        base: Addr,
        len: u64,
        unit: u64,
    ) -> Result<Allocator, TxError> {
        let bad = |problem: String| TxError::BadArea {
            structure: "allocator",
            addr: base,
            problem,
        };
        if base % LINE != 0 {
            return Err(bad(format!("base is not {LINE}-byte aligned")));
        }
        if unit < 8 || !unit.is_power_of_two() {
            return Err(bad(format!(
                "unit {unit} is not a power of two of at least 8 bytes"
            )));
        }
        pmlab_spine::check_bounds(base, len, mem.size())?;
        // Largest unit count whose state array and heap fit.
        let mut units = len.saturating_sub(STATES_OFF + LINE) / (unit + 1);
        let heap_off = |u: u64| (STATES_OFF + u.div_ceil(32) * 8).div_ceil(LINE) * LINE;
        while units > 0 && heap_off(units) + units * unit > len {
            units -= 1;
        }
        if units == 0 {
            return Err(bad(format!("{len} bytes hold no unit of {unit} bytes")));
        }
        let mut h = [0u8; 64];
        put_u64(&mut h, 0, ALLOC_MAGIC);
        put_u64(&mut h, 8, unit);
        put_u64(&mut h, 16, units);
        put_u64(&mut h, 24, STATES_OFF);
        put_u64(&mut h, 32, heap_off(units));
        let crc = crc32fast::hash(&h[0..40]);
        put_u32(&mut h, 40, crc);
        mem.write(base, &h)?;
        mem.write(base + INTENT_OFF, &[0u8; 64])?;
        let states_len = heap_off(units) - STATES_OFF;
        mem.write(base + STATES_OFF, &vec![0u8; states_len as usize])?;
        mem.persist(base, heap_off(units))?;
        Ok(Allocator {
            base,
            unit,
            units,
            heap: base + heap_off(units),
            states: vec![UnitState::Free; units as usize],
            hint: 0,
            faults: FaultPlan::CORRECT,
        })
    }

    /// Opens a formatted allocator and recovers: a live intent is redone and cleared.
    /// Returns the intent that was redone, if any.
    pub fn open<M: Memory>(
        mem: &mut M,
        base: Addr,
    ) -> Result<(Allocator, Option<Intent>), TxError> {
        let mut h = [0u8; 64];
        mem.read(base, &mut h)?;
        let bad = |offset: u64, field: &'static str, problem: String| TxError::BadHeader {
            structure: "allocator",
            addr: base,
            offset,
            field,
            problem,
        };
        let magic = get_u64(&h, 0).unwrap_or(0);
        if magic != ALLOC_MAGIC {
            return Err(bad(
                0,
                "magic",
                format!("{magic:#018x} is not {ALLOC_MAGIC:#018x}"),
            ));
        }
        let (stored, computed) = (get_u32(&h, 40).unwrap_or(0), crc32fast::hash(&h[0..40]));
        if stored != computed {
            return Err(bad(
                40,
                "crc",
                format!("stored {stored:#010x}, computed {computed:#010x}"),
            ));
        }
        let unit = get_u64(&h, 8).unwrap_or(0);
        let units = get_u64(&h, 16).unwrap_or(0);
        let heap_off = get_u64(&h, 32).unwrap_or(0);
        pmlab_spine::check_bounds(
            base,
            heap_off.saturating_add(units.saturating_mul(unit)),
            mem.size(),
        )?;
        let mut a = Allocator {
            base,
            unit,
            units,
            heap: base + heap_off,
            states: Vec::new(),
            hint: 0,
            faults: FaultPlan::CORRECT,
        };
        a.resync(mem)?;
        let mut ib = [0u8; 40];
        mem.read(base + INTENT_OFF, &mut ib)?;
        let intent = decode_intent(&ib);
        if let Some(i) = intent {
            a.apply(mem, &i)?;
            a.clear_intent(mem)?;
        }
        Ok((a, intent))
    }

    /// Runs with `faults` (a deliberately broken plan only in crash tests).
    pub fn with_faults(mut self, faults: FaultPlan) -> Allocator {
        self.faults = faults;
        self
    }

    /// Bytes per unit.
    pub fn unit(&self) -> u64 {
        self.unit
    }

    /// Units in the heap.
    pub fn units(&self) -> u64 {
        self.units
    }

    /// Address of unit `u`.
    pub fn unit_addr(&self, u: u64) -> Addr {
        self.heap + u * self.unit
    }

    fn unit_of(&self, ptr: Addr) -> Option<u64> {
        let off = ptr.checked_sub(self.heap)?;
        (off % self.unit == 0 && off / self.unit < self.units).then_some(off / self.unit)
    }

    fn find_free(&self, count: u64) -> Option<u64> {
        let n = self.units;
        let mut tried = 0;
        let mut start = self.hint % n;
        while tried < n {
            if start + count > n {
                tried += n - start;
                start = 0;
                continue;
            }
            match (start..start + count).find(|&u| self.states[u as usize] != UnitState::Free) {
                None => return Some(start),
                Some(busy) => {
                    tried += busy + 1 - start;
                    start = busy + 1;
                }
            }
        }
        None
    }

    /// Step 2 of the protocol (and recovery's redo): states and slot, persisted.
    fn apply<M: Memory>(&mut self, mem: &mut M, i: &Intent) -> Result<(), TxError> {
        let last = i
            .first
            .checked_add(i.count)
            .filter(|&e| e <= self.units && i.count > 0);
        if last.is_none() {
            return Err(TxError::BadHeader {
                structure: "allocator",
                addr: self.base,
                offset: INTENT_OFF,
                field: "intent",
                problem: format!(
                    "extent {}+{} lies outside {} units",
                    i.first, i.count, self.units
                ),
            });
        }
        for u in i.first..i.first + i.count {
            self.states[u as usize] = match (i.alloc, u == i.first) {
                (false, _) => UnitState::Free,
                (true, true) => UnitState::Head,
                (true, false) => UnitState::Continuation,
            };
        }
        let mut lines = LineSet::default();
        for w in i.first / 32..=(i.first + i.count - 1) / 32 {
            let word = (0..32u64)
                .filter(|k| w * 32 + k < self.units)
                .fold(0u64, |acc, k| {
                    acc | (self.states[(w * 32 + k) as usize] as u64) << (2 * k)
                });
            let at = self.base + STATES_OFF + w * 8;
            mem.write_u64(at, word)?;
            lines.add(at, 8);
        }
        let ptr = if i.alloc { self.unit_addr(i.first) } else { 0 };
        mem.write_u64(i.slot, ptr)?;
        lines.add(i.slot, 8);
        lines.flush(mem)?;
        mem.fence();
        Ok(())
    }

    fn write_intent<M: Memory>(&mut self, mem: &mut M, i: &Intent) -> Result<(), TxError> {
        mem.write(self.base + INTENT_OFF, &encode_intent(i))?;
        mem.flush(self.base + INTENT_OFF, 40, pmlab_spine::FlushKind::Clwb)?;
        if !self.faults.has(Fault::AllocSkipIntentFence) {
            mem.fence();
        }
        Ok(())
    }

    fn clear_intent<M: Memory>(&mut self, mem: &mut M) -> Result<(), TxError> {
        mem.write_u64(self.base + INTENT_OFF, OP_NONE)?;
        mem.persist(self.base + INTENT_OFF, 8)?;
        Ok(())
    }

    /// Allocates `bytes` (rounded up to whole units) and stores the pointer in the
    /// persistent `slot`, atomically (3 fences). The slot must not own an extent.
    pub fn alloc_into<M: Memory>(
        &mut self,
        mem: &mut M,
        bytes: u64,
        slot: Addr,
    ) -> Result<Addr, TxError> {
        pmlab_spine::check_bounds(slot, 8, mem.size())?;
        let count = bytes.div_ceil(self.unit).max(1);
        let first = self.find_free(count).ok_or(TxError::OutOfSpace {
            units: count,
            bytes,
        })?;
        let i = Intent {
            alloc: true,
            first,
            count,
            slot,
        };
        self.write_intent(mem, &i)?;
        self.apply(mem, &i)?;
        self.clear_intent(mem)?;
        self.hint = first + count;
        Ok(self.unit_addr(first))
    }

    /// Frees the extent `slot` points to and zeroes the slot, atomically (3 fences).
    pub fn free_from<M: Memory>(&mut self, mem: &mut M, slot: Addr) -> Result<(), TxError> {
        let ptr = mem.read_u64(slot)?;
        let first = self
            .unit_of(ptr)
            .filter(|&u| self.states[u as usize] == UnitState::Head)
            .ok_or(TxError::BadPointer { slot, ptr })?;
        let count = self.extent_len(first);
        let i = Intent {
            alloc: false,
            first,
            count,
            slot,
        };
        self.write_intent(mem, &i)?;
        self.apply(mem, &i)?;
        self.clear_intent(mem)
    }

    /// Allocates `bytes` inside a transaction and stores the pointer in `slot`, both
    /// as transactional writes: they commit or vanish with the rest of it.
    ///
    /// The handle's mirror marks the extent busy at once, so the same transaction never
    /// hands it out twice; after an abort call [`Allocator::resync`] to release it.
    /// A free area's state words may hold bits a concurrent transactional free cleared,
    /// so the words are read and modified through the transaction, never rebuilt from
    /// the mirror.
    ///
    /// Used with a redo log, an allocator's state words must change only through
    /// transactions (recovery replays the last log over them); do not mix with
    /// [`Allocator::alloc_into`] on the same allocator.
    pub fn alloc_in<T: TxMemory>(
        &mut self,
        tx: &mut T,
        bytes: u64,
        slot: Addr,
    ) -> Result<Addr, TxError> {
        let count = bytes.div_ceil(self.unit).max(1);
        let first = self.find_free(count).ok_or(TxError::OutOfSpace {
            units: count,
            bytes,
        })?;
        self.set_states_in(tx, first, count, true)?;
        for u in first..first + count {
            self.states[u as usize] = if u == first {
                UnitState::Head
            } else {
                UnitState::Continuation
            };
        }
        let ptr = self.unit_addr(first);
        tx.tx_write_u64(slot, ptr)?;
        self.hint = first + count;
        Ok(ptr)
    }

    /// Frees the extent `slot` points to and zeroes the slot, inside a transaction.
    /// The mirror keeps the extent busy (so it is not reused before the free commits);
    /// [`Allocator::resync`] after the commit makes it available again.
    pub fn free_in<T: TxMemory>(&mut self, tx: &mut T, slot: Addr) -> Result<(), TxError> {
        let ptr = tx.tx_read_u64(slot)?;
        let first = self.unit_of(ptr).ok_or(TxError::BadPointer { slot, ptr })?;
        if self.state_in(tx, first)? != UnitState::Head {
            return Err(TxError::BadPointer { slot, ptr });
        }
        let mut count = 1;
        while first + count < self.units
            && self.state_in(tx, first + count)? == UnitState::Continuation
        {
            count += 1;
        }
        self.set_states_in(tx, first, count, false)?;
        tx.tx_write_u64(slot, 0)
    }

    fn state_in<T: TxMemory>(&self, tx: &mut T, u: u64) -> Result<UnitState, TxError> {
        let w = tx.tx_read_u64(self.base + STATES_OFF + u / 32 * 8)?;
        Ok(UnitState::from_bits((w >> (2 * (u % 32))) & 3).unwrap_or(UnitState::Free))
    }

    fn set_states_in<T: TxMemory>(
        &self,
        tx: &mut T,
        first: u64,
        count: u64,
        alloc: bool,
    ) -> Result<(), TxError> {
        for w in first / 32..=(first + count - 1) / 32 {
            let at = self.base + STATES_OFF + w * 8;
            let mut word = tx.tx_read_u64(at)?;
            for u in (w * 32).max(first)..((w + 1) * 32).min(first + count) {
                let bits = match (alloc, u == first) {
                    (false, _) => UnitState::Free,
                    (true, true) => UnitState::Head,
                    (true, false) => UnitState::Continuation,
                } as u64;
                let shift = 2 * (u % 32);
                word = (word & !(3 << shift)) | bits << shift;
            }
            tx.tx_write_u64(at, word)?;
        }
        Ok(())
    }

    /// Reloads the mirror from persistent memory: after an aborted transaction that
    /// allocated, or a committed one that freed.
    pub fn resync<M: Memory>(&mut self, mem: &mut M) -> Result<(), TxError> {
        let mut words = vec![0u8; (self.units.div_ceil(32) * 8) as usize];
        mem.read(self.base + STATES_OFF, &mut words)?;
        self.states = (0..self.units)
            .map(|u| {
                let w = get_u64(&words, (u / 32 * 8) as usize).unwrap_or(0);
                UnitState::from_bits((w >> (2 * (u % 32))) & 3).unwrap_or(UnitState::Free)
            })
            .collect();
        Ok(())
    }

    fn extent_len(&self, head: u64) -> u64 {
        1 + (head + 1..self.units)
            .take_while(|&u| self.states[u as usize] == UnitState::Continuation)
            .count() as u64
    }

    /// Checks the persistent state (not this handle's mirror): the intent is clear,
    /// states are valid, and — given every slot that may own an extent — each
    /// allocated extent has exactly one owner and each non-null slot owns an extent.
    /// With no slots, only the structure is checked.
    pub fn check<M: Memory>(
        mem: &mut M,
        base: Addr,
        slots: &[Addr],
    ) -> Result<AllocReport, AllocCheckError> {
        let mut ib = [0u8; 40];
        mem.read(base + INTENT_OFF, &mut ib)?;
        if decode_intent(&ib).is_some() {
            return Err(AllocCheckError::LiveIntent(base + INTENT_OFF));
        }
        // Read the states raw, without the mirror's forgiving decoding.
        let mut h = [0u8; 64];
        mem.read(base, &mut h)?;
        let units = get_u64(&h, 16).unwrap_or(0);
        let unit = get_u64(&h, 8).unwrap_or(1);
        let heap = base + get_u64(&h, 32).unwrap_or(0);
        let mut words = vec![0u8; (units.div_ceil(32) * 8) as usize];
        mem.read(base + STATES_OFF, &mut words)?;
        let mut report = AllocReport::default();
        let mut heads = std::collections::BTreeMap::new();
        let mut current: Option<u64> = None;
        for u in 0..units {
            let w = get_u64(&words, (u / 32 * 8) as usize).unwrap_or(0);
            match UnitState::from_bits((w >> (2 * (u % 32))) & 3) {
                None => return Err(AllocCheckError::InvalidState { unit: u }),
                Some(UnitState::Free) => {
                    report.free_units += 1;
                    current = None;
                }
                Some(UnitState::Head) => {
                    report.extents += 1;
                    report.used_units += 1;
                    heads.insert(heap + u * unit, (1u64, None::<Addr>));
                    current = Some(heap + u * unit);
                }
                Some(UnitState::Continuation) => {
                    let Some(h) = current else {
                        return Err(AllocCheckError::OrphanContinuation { unit: u });
                    };
                    report.used_units += 1;
                    heads.get_mut(&h).expect("head recorded").0 += 1;
                }
            }
        }
        for &slot in slots {
            let ptr = mem.read_u64(slot)?;
            if ptr == 0 {
                continue;
            }
            match heads.get_mut(&ptr) {
                None => return Err(AllocCheckError::DanglingSlot { slot, ptr }),
                Some((_, Some(first))) => {
                    return Err(AllocCheckError::DoubleOwner {
                        ptr,
                        first: *first,
                        second: slot,
                    });
                }
                Some((_, owner)) => *owner = Some(slot),
            }
        }
        if !slots.is_empty() {
            if let Some((&ptr, &(units, _))) = heads.iter().find(|(_, (_, o))| o.is_none()) {
                return Err(AllocCheckError::Leak { ptr, units });
            }
        }
        Ok(report)
    }
}
