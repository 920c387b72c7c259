//! What the map workloads share: the toggle operation stream, the first fill, and
//! storing a node's changed bytes.

use pmlab_spine::Addr;
use pmlab_tx::{Batch, Protocol, TxMemory};

use crate::error::WorkloadError;
use crate::keys::key_of;
use crate::workload::{Ops, in_tx};

/// Inserts per transaction while a map is first filled.
pub(crate) const FILL_BATCH: u64 = 16;

/// A map of 8-byte keys to values, updated inside a transaction.
pub(crate) trait Map {
    /// The value stored under `key`.
    fn get<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<Option<u64>, WorkloadError>;
    /// Inserts `key` (absent) with `value`.
    fn insert<T: TxMemory>(&self, m: &mut T, key: u64, value: u64) -> Result<(), WorkloadError>;
    /// Removes `key` (present).
    fn remove<T: TxMemory>(&self, m: &mut T, key: u64) -> Result<(), WorkloadError>;
}

/// One transaction of `ops.per_tx()` toggles: a key present is removed, a key absent
/// inserted with a random value. The stores of the whole transaction reach the
/// protocol together at its end ([`Batch`]).
pub(crate) fn toggle_tx<M: Map, P: Protocol>(
    map: &M,
    p: &mut P,
    batch: &mut Batch,
    ops: &mut Ops,
) -> Result<(), WorkloadError> {
    in_tx(p, |p| {
        let mut s = batch.on(p);
        for _ in 0..ops.per_tx() {
            let key = key_of(ops.pick());
            if map.get(&mut s, key)?.is_some() {
                map.remove(&mut s, key)?;
            } else {
                let v = ops.value();
                map.insert(&mut s, key, v)?;
            }
        }
        Ok(s.finish()?)
    })
}

/// Inserts the keys of the even ranks below `2 * elements` (value: the rank), a few
/// per transaction: the map's first half-full state.
pub(crate) fn fill<M: Map, P: Protocol>(
    map: &M,
    p: &mut P,
    batch: &mut Batch,
    elements: u64,
) -> Result<(), WorkloadError> {
    for first in (0..elements).step_by(FILL_BATCH as usize) {
        in_tx(p, |p| {
            let mut s = batch.on(p);
            for i in first..(first + FILL_BATCH).min(elements) {
                map.insert(&mut s, key_of(2 * i), 2 * i)?;
            }
            Ok(s.finish()?)
        })?;
    }
    Ok(())
}

/// Stores the bytes in which `new` differs from `old` (two images of the object at
/// `addr`), as runs; runs closer than 16 bytes are stored as one.
pub(crate) fn store_changes<T: TxMemory>(
    m: &mut T,
    addr: Addr,
    old: &[u8],
    new: &[u8],
) -> Result<(), WorkloadError> {
    const GAP: usize = 16;
    let mut run: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < new.len() {
        if old[i] != new[i] {
            run = match run {
                Some((s, e)) if i <= e + GAP => Some((s, i + 1)),
                Some((s, e)) => {
                    m.tx_write(addr + s as u64, &new[s..e])?;
                    Some((i, i + 1))
                }
                None => Some((i, i + 1)),
            };
        }
        i += 1;
    }
    if let Some((s, e)) = run {
        m.tx_write(addr + s as u64, &new[s..e])?;
    }
    Ok(())
}
