//! Recovery from the memory log (paper 001, §III-C), over any memory: scan the valid
//! block groups, decide which transactions committed, write their blocks to their home
//! locations in transaction order, then restart the log.
//!
//! Commit is decided one of two ways:
//!
//! - [`CommitRule::Record`] (S-WAL, H-WAL): a transaction committed iff its commit
//!   record is in the log (WAL writes it only after all its blocks are persistent).
//! - [`CommitRule::Count`] (EC-WAL, LOC-WAL): Eager Commit's count-based protocol. A
//!   transaction's blocks are counted and compared with the non-zero TxCnt one of them
//!   (or a count record) carries, after adding `n` for every dependency pair `<Tx, Ty,
//!   n>` whose `Ty` committed (pairs are evaluated from the tail to the head); then the
//!   first transaction that did not commit cuts off every later one (in-order commit).
//!   Transaction IDs run consecutively from the head's base: an ID that does not appear
//!   at all is a transaction whose every block was lost, and cuts too; an aborted one
//!   (abort record) is skipped.
//!
//! The paper's three steps are run to a fixed point: a transaction whose count was
//! completed by a pair with a `Ty` the in-order cut later removed is not committed
//! after all (its coalesced blocks are only in `Ty`'s), so the cut moves before it and
//! the counts are evaluated again. With the dependency pairs written at the end of a
//! speculation window while its last blocks may still be in flight, the literal three
//! steps could commit such a transaction without the blocks it depends on.
//!
//! Recovery is idempotent: it changes only home locations until every committed block
//! is durable there, and only then writes a new head that restarts the log past every
//! group it read; a crash during it is recovered by running it again.

use std::collections::BTreeMap;

use pmlab_spine::{FlushKind, LINE, Memory, SpineError};

use super::format::{
    BlkTag, GroupKind, Head, Layout, Reading, Record, SLOTS, SlotKind, WordTag, full_tx, word,
};

/// How commit is decided (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitRule {
    /// Commit records (S-WAL, H-WAL).
    Record,
    /// Eager Commit's counts, dependency pairs and in-order commit (EC-WAL, LOC-WAL).
    Count,
}

/// Deliberately broken recoveries, for the crash tests to catch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryFaults {
    /// Commit a transaction as soon as the block carrying its TxCnt is found, without
    /// counting its other blocks: trusts a transaction whose block groups reached
    /// memory only in part.
    pub trust_partial: bool,
    /// Skip the in-order cut: a transaction whose blocks all arrived commits even if an
    /// earlier one did not (Speculative Persistence committing out of order).
    pub out_of_order: bool,
}

/// Why the log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// Memory refused an access.
    #[error(transparent)]
    Memory(#[from] SpineError),
    /// The log head or a group is not what this log writes.
    #[error("memory log at {addr:#x}: {message}")]
    Corrupt {
        /// Where.
        addr: u64,
        /// What.
        message: String,
    },
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Valid groups read.
    pub groups: u64,
    /// Transactions that committed (and were written home).
    pub committed: u64,
    /// Transactions in the log that did not.
    pub discarded: u64,
    /// Blocks written home.
    pub blocks: u64,
    /// The last committed transaction (0 if none).
    pub last_committed: u64,
    /// The head recovery left: where the log restarts.
    pub head: Head,
}

/// One transaction as the log shows it.
#[derive(Clone, Debug, Default)]
struct TxLog {
    /// `(seq, offset in the line, bytes)` per block, with the block's home line.
    blocks: Vec<(u64, u64, u64, Vec<u8>)>,
    cnt: Option<u16>,
    pairs: Vec<(u64, u16)>,
    aborted: bool,
    commit_record: bool,
}

/// Everything the scan found.
#[derive(Default)]
struct Scan {
    txs: BTreeMap<u64, TxLog>,
    groups: u64,
}

fn corrupt(addr: u64, message: impl Into<String>) -> RecoveryError {
    RecoveryError::Corrupt {
        addr,
        message: message.into(),
    }
}

/// Reads the log head of `layout`.
pub fn read_head<M: Memory + ?Sized>(m: &mut M, layout: &Layout) -> Result<Head, RecoveryError> {
    let mut b = [0u8; 64];
    m.read(layout.base, &mut b)?;
    layout.decode_head(&b).map_err(|e| corrupt(layout.base, e))
}

/// Recovers the log in `layout` on `m` (see the module documentation).
pub fn recover<M: Memory + ?Sized>(
    m: &mut M,
    layout: &Layout,
    rule: CommitRule,
    faults: RecoveryFaults,
) -> Result<Recovered, RecoveryError> {
    let head = read_head(m, layout)?;
    let scan = scan(m, layout, &head)?;
    let committed = decide(&scan.txs, head.base_tx, rule, faults);
    let mut out = Recovered {
        groups: scan.groups,
        ..Recovered::default()
    };
    for (id, t) in &scan.txs {
        if !committed.contains(id) {
            out.discarded += 1;
            continue;
        }
        out.committed += 1;
        out.last_committed = *id;
        let mut blocks: Vec<_> = t.blocks.iter().collect();
        blocks.sort_by_key(|b| b.0);
        for (_, line, off, data) in blocks {
            let addr = line * LINE + off;
            m.write(addr, data)?;
            m.flush(addr, data.len() as u64, FlushKind::Clwb)?;
            out.blocks += 1;
        }
    }
    m.fence();
    let next = scan
        .txs
        .keys()
        .next_back()
        .map_or(head.base_tx, |&last| last + 1)
        .max(head.base_tx);
    out.head = Head {
        start_seq: layout.fresh_start(head.start_seq),
        base_tx: next,
    };
    m.write(layout.base, &layout.encode_head(&out.head))?;
    m.flush(layout.base, LINE, FlushKind::Clwb)?;
    m.fence();
    Ok(out)
}

/// Reads every valid group of the log: the group at each place whose sequence number
/// (Line reading) or lap (Word reading) is the one that place holds in the valid log,
/// `[start, start + groups)`. A group that did not reach memory leaves a gap, and the
/// groups after it are still read: the counts, not the order of arrival, decide what
/// committed (groups land in any order across the banks).
fn scan<M: Memory + ?Sized>(m: &mut M, l: &Layout, head: &Head) -> Result<Scan, RecoveryError> {
    let mut s = Scan::default();
    for seq in head.start_seq..head.start_seq + l.ngroups {
        let addr = l.group_addr(seq);
        let valid = match l.reading {
            Reading::Line => scan_line_group(m, l, head, seq, addr, &mut s)?,
            Reading::Word => scan_word_group(m, l, head, seq, addr, &mut s)?,
        };
        s.groups += u64::from(valid);
    }
    Ok(s)
}

fn scan_line_group<M: Memory + ?Sized>(
    m: &mut M,
    _l: &Layout,
    head: &Head,
    seq: u64,
    addr: u64,
    s: &mut Scan,
) -> Result<bool, RecoveryError> {
    let mut meta = [0u8; 64];
    m.read(addr, &mut meta)?;
    if word(&meta, 0) != seq {
        return Ok(false);
    }
    for i in 0..SLOTS {
        let tag = BlkTag::decode(word(&meta, i + 1)).map_err(|e| corrupt(addr, e))?;
        let slot = addr + (i as u64 + 1) * LINE;
        match tag.kind {
            SlotKind::Empty => {}
            SlotKind::Data => {
                let mut data = vec![0u8; 64];
                m.read(slot, &mut data)?;
                let t = s.txs.entry(full_tx(head.base_tx, tag.tx)).or_default();
                t.blocks
                    .push((seq * 8 + i as u64, u64::from(tag.line), 0, data));
                if tag.cnt != 0 {
                    t.cnt = Some(tag.cnt);
                }
            }
            SlotKind::Commit => {
                s.txs
                    .entry(full_tx(head.base_tx, tag.tx))
                    .or_default()
                    .commit_record = true;
            }
            SlotKind::Records => {
                let mut b = [0u8; 64];
                m.read(slot, &mut b)?;
                for j in 0..8 {
                    add_record(s, word(&b, j), head.base_tx, slot)?;
                }
            }
        }
    }
    Ok(true)
}

fn scan_word_group<M: Memory + ?Sized>(
    m: &mut M,
    l: &Layout,
    head: &Head,
    seq: u64,
    addr: u64,
    s: &mut Scan,
) -> Result<bool, RecoveryError> {
    let mut b = [0u8; 64];
    m.read(addr, &mut b)?;
    let tag = WordTag::decode(word(&b, 0));
    if tag.kind == GroupKind::Empty || u64::from(tag.lap) != l.lap(seq) {
        return Ok(false);
    }
    let id = full_tx(head.base_tx, tag.tx);
    let (off, data) = match tag.kind {
        GroupKind::DataLow => (0, b[8..64].to_vec()),
        GroupKind::DataHigh => (56, b[8..16].to_vec()),
        GroupKind::Records => {
            for j in 1..8 {
                add_record(s, word(&b, j), head.base_tx, addr)?;
            }
            return Ok(true);
        }
        GroupKind::Empty => unreachable!("checked above"),
    };
    let t = s.txs.entry(id).or_default();
    t.blocks.push((seq, u64::from(tag.line), off, data));
    if tag.cnt != 0 {
        t.cnt = Some(tag.cnt);
    }
    Ok(true)
}

fn add_record(s: &mut Scan, w: u64, base: u64, addr: u64) -> Result<(), RecoveryError> {
    match Record::decode(w, base).map_err(|e| corrupt(addr, e))? {
        None => {}
        Some(Record::Pair { tx, ty, n }) => s.txs.entry(tx).or_default().pairs.push((ty, n)),
        Some(Record::Count { tx, cnt }) => s.txs.entry(tx).or_default().cnt = Some(cnt),
        Some(Record::Abort { tx }) => s.txs.entry(tx).or_default().aborted = true,
        Some(Record::Commit { tx }) => s.txs.entry(tx).or_default().commit_record = true,
    }
    Ok(())
}

/// The committed transactions.
fn decide(
    txs: &BTreeMap<u64, TxLog>,
    base: u64,
    rule: CommitRule,
    faults: RecoveryFaults,
) -> std::collections::BTreeSet<u64> {
    match rule {
        CommitRule::Record => txs
            .iter()
            .filter(|(_, t)| t.commit_record && !t.aborted)
            .map(|(&id, _)| id)
            .collect(),
        CommitRule::Count => decide_by_count(txs, base, faults),
    }
}

fn decide_by_count(
    txs: &BTreeMap<u64, TxLog>,
    base: u64,
    faults: RecoveryFaults,
) -> std::collections::BTreeSet<u64> {
    // Consecutive IDs from the base: the first absent one ends the log's transactions
    // (unless the broken out-of-order variant looks past it).
    let order: Vec<u64> = if faults.out_of_order {
        txs.keys().copied().filter(|&id| id >= base).collect()
    } else {
        (base..).take_while(|id| txs.contains_key(id)).collect()
    };
    let index: BTreeMap<u64, usize> = order.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let mut limit = order.len();
    loop {
        let mut c = vec![false; order.len()];
        for i in (0..limit).rev() {
            let t = &txs[&order[i]];
            c[i] = !t.aborted
                && counts(t, faults, |ty| {
                    index.get(&ty).is_some_and(|&j| j < limit && c[j])
                });
        }
        if faults.out_of_order {
            return order
                .iter()
                .zip(&c)
                .filter(|(_, k)| **k)
                .map(|(&id, _)| id)
                .collect();
        }
        let first_bad = (0..limit)
            .find(|&i| !txs[&order[i]].aborted && !c[i])
            .unwrap_or(limit);
        if first_bad == limit {
            return order[..limit]
                .iter()
                .zip(&c)
                .filter(|(_, k)| **k)
                .map(|(&id, _)| id)
                .collect();
        }
        limit = first_bad;
    }
}

/// Whether `t`'s blocks, plus those coalesced into committed successors, make its count.
fn counts(t: &TxLog, faults: RecoveryFaults, committed: impl Fn(u64) -> bool) -> bool {
    let Some(cnt) = t.cnt else { return false };
    if faults.trust_partial {
        return true;
    }
    let coalesced: u64 = t
        .pairs
        .iter()
        .filter(|(ty, _)| committed(*ty))
        .map(|&(_, n)| u64::from(n))
        .sum();
    t.blocks.len() as u64 + coalesced == u64::from(cnt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(blocks: usize, cnt: Option<u16>, pairs: &[(u64, u16)]) -> TxLog {
        TxLog {
            blocks: (0..blocks).map(|i| (i as u64, 0, 0, vec![0])).collect(),
            cnt,
            pairs: pairs.to_vec(),
            ..TxLog::default()
        }
    }

    fn committed(txs: &[(u64, TxLog)], faults: RecoveryFaults) -> Vec<u64> {
        let map: BTreeMap<u64, TxLog> = txs.iter().cloned().collect();
        decide_by_count(&map, 1, faults).into_iter().collect()
    }

    #[test]
    fn counts_pairs_and_the_in_order_cut() {
        let ok = RecoveryFaults::default();
        // T1: 2 of 3 blocks logged, 1 coalesced into T3; T2 complete; T3 complete.
        let all = vec![
            (1, tx(2, Some(3), &[(3, 1)])),
            (2, tx(1, Some(1), &[])),
            (3, tx(2, Some(2), &[])),
        ];
        assert_eq!(committed(&all, ok), vec![1, 2, 3]);
        // T2 lost a block: T2 and T3 are cut, and then T1, whose pair needs T3.
        let mut lost = all.clone();
        lost[1].1 = tx(0, Some(1), &[]);
        assert_eq!(committed(&lost, ok), Vec::<u64>::new());
        // Out of order, T3 would commit without T2 (and T1 through it).
        let ooo = RecoveryFaults {
            out_of_order: true,
            ..ok
        };
        assert_eq!(committed(&lost, ooo), vec![1, 3]);
        // A missing block of T3 without the pair rule's fixed point.
        let mut t3 = all.clone();
        t3[2].1 = tx(1, Some(2), &[]);
        assert_eq!(committed(&t3, ok), Vec::<u64>::new());
        let trust = RecoveryFaults {
            trust_partial: true,
            ..ok
        };
        assert_eq!(committed(&t3, trust), vec![1, 2, 3]);
    }

    #[test]
    fn an_absent_id_cuts_and_an_aborted_one_does_not() {
        let ok = RecoveryFaults::default();
        let gap = vec![(1, tx(1, Some(1), &[])), (3, tx(1, Some(1), &[]))];
        assert_eq!(committed(&gap, ok), vec![1]);
        let mut aborted = tx(1, None, &[]);
        aborted.aborted = true;
        let skip = vec![
            (1, tx(1, Some(1), &[])),
            (2, aborted),
            (3, tx(1, Some(1), &[])),
        ];
        assert_eq!(committed(&skip, ok), vec![1, 3]);
    }
}
