//! [`NodeReads::Edit`]: a leaf edited in place by an insert or delete — only the pairs
//! the change shifts are read and written (a `memmove` of the keys after the index and
//! one of the values), then the new pair (or zeros where the last pair was) and the
//! count. The bytes left are exactly those [`Img::fill`] would leave, so a tree edited
//! either way is the same tree, and the checker is the same.

use pmlab_spine::Addr;
use pmlab_tx::TxMemory;

use super::{HEAD, Path, Probe, Tree};
use crate::error::WorkloadError;

impl Tree {
    /// The leaf that holds (or would hold) `k`, searched in place, and the path to it
    /// (`None`: the tree is empty).
    pub(super) fn find_leaf<T: TxMemory>(
        &self,
        m: &mut T,
        k: &[u8],
    ) -> Result<Option<(Probe, Path)>, WorkloadError> {
        let mut at = m.tx_read_u64(self.root)?;
        if at == 0 {
            return Ok(None);
        }
        let mut path = Vec::new();
        loop {
            let probe = Probe::head(m, self.shape, at)?;
            if probe.leaf {
                return Ok(Some((probe, path)));
            }
            let i = probe.search(m, k, true)?;
            path.push((at, i));
            at = m.tx_read_u64(probe.slot(i))?;
        }
    }

    /// Inserts `k` with `v` into a leaf with room, shifting the pairs after it.
    pub(super) fn insert_in_place<T: TxMemory>(
        &self,
        m: &mut T,
        leaf: &Probe,
        k: &[u8],
        v: &[u8],
    ) -> Result<(), WorkloadError> {
        let (ks, vs, n) = (self.shape.key, self.shape.val, leaf.count);
        let i = leaf.search(m, k, false)?;
        let key_at = |j: usize| leaf.addr + (HEAD + j * ks) as u64;
        shift(m, key_at(i), key_at(i + 1), (n - i) * ks)?;
        shift(m, leaf.slot(i), leaf.slot(i + 1), (n - i) * vs)?;
        m.tx_write(key_at(i), k)?;
        m.tx_write(leaf.slot(i), v)?;
        set_count(m, leaf.addr, n + 1)
    }

    /// Removes `k` (if present) from its leaf in place, then rebalances from the
    /// whole leaf if it fell below half full.
    pub(super) fn remove_in_place<T: TxMemory>(
        &self,
        m: &mut T,
        k: &[u8],
    ) -> Result<(), WorkloadError> {
        let Some((leaf, mut path)) = self.find_leaf(m, k)? else {
            return Ok(());
        };
        let (ks, vs, n) = (self.shape.key, self.shape.val, leaf.count);
        let i = leaf.search(m, k, false)?;
        if i >= n {
            return Ok(());
        }
        let mut found = vec![0u8; ks];
        leaf.key(m, i, &mut found)?;
        if found != k {
            return Ok(());
        }
        self.add_count(m, u64::MAX)?;
        let key_at = |j: usize| leaf.addr + (HEAD + j * ks) as u64;
        shift(m, key_at(i + 1), key_at(i), (n - 1 - i) * ks)?;
        shift(m, leaf.slot(i + 1), leaf.slot(i), (n - 1 - i) * vs)?;
        m.tx_write(key_at(n - 1), &vec![0u8; ks])?;
        m.tx_write(leaf.slot(n - 1), &vec![0u8; vs])?;
        set_count(m, leaf.addr, n - 1)?;
        if n - 1 < self.shape.min(true) {
            let whole = self.load(m, leaf.addr)?;
            self.rebalance(m, whole, &mut path)?;
        }
        Ok(())
    }
}

/// Moves `len` bytes from `from` to `to` (a `memmove`: read, then written).
fn shift<T: TxMemory>(m: &mut T, from: Addr, to: Addr, len: usize) -> Result<(), WorkloadError> {
    if len == 0 {
        return Ok(());
    }
    let mut b = vec![0u8; len];
    m.tx_read(from, &mut b)?;
    Ok(m.tx_write(to, &b)?)
}

/// Writes a node's count (bytes 4..8 of its head).
fn set_count<T: TxMemory>(m: &mut T, node: Addr, n: usize) -> Result<(), WorkloadError> {
    Ok(m.tx_write(node + 4, &(n as u32).to_le_bytes())?)
}
