//! S-WAL: write-ahead logging in software (paper 001, §II-B and §V-B), on the machine
//! without transactional tags, through the caches.
//!
//! The log is Eager Commit's block-group log read with commit records (so one recovery
//! serves S-WAL and H-WAL): a transaction's first store to a line copies the line into a
//! slot of a group of its own and tags the slot; every store goes to the slot (the log
//! copy, cached) and to the transaction's write set, a small volatile buffer reused by
//! every transaction, which stays in L1 (its accesses are charged as L1 hits). At
//! commit, software makes the log persistent and orders it: `clflush` of every line of
//! the transaction's groups, `mfence`; then the commit record (a group of one metadata
//! line whose tag commits the transaction: a line the cache writes back whole, so no
//! crash tears it), `clflush`, `mfence` — the acknowledgment. Then the in-place
//! writes: the new data stored at home, the second cached copy of each line; they reach memory as the cache
//! writes them back. Every 64 transactions after the 128th, the 64 oldest are
//! checkpointed (their home lines `clflush`ed, `mfence`) and the log head moves past
//! them (store, `clflush`, `mfence`) — the same table size and checkpoint policy as the
//! hardware protocols, so that S-WAL and H-WAL differ in who does the work and in the
//! two cached copies, not in ordering (§V-B: "H-WAL does not change the ordering
//! behavior of S-WAL").

use std::collections::{HashMap, VecDeque};

use pmlab_model::Machine;
use pmlab_spine::LINE;

use crate::baseline::{write_back_all, write_back_evicted};
use crate::core::{ComputeModel, Core};
use crate::engine::{Engine, EngineStats, HwError};
use crate::ledger::Wait;
use crate::loc::TRACKED_TXS;
use crate::wal::format::{BlkTag, Head, Layout, Reading, SLOTS, SlotKind};

/// The running transaction.
#[derive(Debug, Default)]
struct Active {
    id: Option<u64>,
    /// Home line -> (group, slot).
    slots: HashMap<u64, (u64, usize)>,
    /// The write set: each line's new bytes.
    set: HashMap<u64, [u8; 64]>,
    lines: Vec<u64>,
    groups: Vec<(u64, usize)>,
}

/// A committed transaction not yet checkpointed.
#[derive(Debug)]
struct Logged {
    id: u64,
    first_seq: u64,
    lines: Vec<u64>,
}

/// S-WAL.
pub struct SWal {
    core: Core,
    layout: Layout,
    next_seq: u64,
    head: Head,
    next_tx: u64,
    /// The last committed transaction (all before it committed too).
    last_committed: u64,
    active: Option<Active>,
    logged: VecDeque<Logged>,
    /// Latest completion of a `clflush` write-back since the last `mfence`.
    flushed_until: u64,
    /// `clflush` waits for its write-back (see [`crate::HwConfig::serial_persist`]).
    serial: bool,
    /// The in-place stores are flushed and fenced at commit (see
    /// [`crate::HwConfig::ordered_in_place`]).
    ordered_in_place: bool,
    stats: EngineStats,
}

impl SWal {
    /// A fresh instance; its log in `[base, base + len)` (formatted here: a head
    /// written, flushed and fenced).
    pub fn format(
        m: Machine,
        base: u64,
        len: u64,
        compute: ComputeModel,
    ) -> Result<SWal, crate::HwSetupError> {
        let layout =
            Layout::new(base, len, Reading::Line).ok_or(crate::HwSetupError::LogArea(base, len))?;
        let head = Head {
            start_seq: 0,
            base_tx: 1,
        };
        let mut s = SWal::resume(m, layout, head, compute)?;
        s.write_head(head);
        Ok(s)
    }

    /// An instance continuing after a recovery left `head`.
    pub fn resume(
        m: Machine,
        layout: Layout,
        head: Head,
        compute: ComputeModel,
    ) -> Result<SWal, crate::HwSetupError> {
        Ok(SWal {
            core: Core::new(m, compute)?,
            layout,
            next_seq: head.start_seq,
            head,
            next_tx: head.base_tx,
            last_committed: head.base_tx - 1,
            active: None,
            logged: VecDeque::new(),
            flushed_until: 0,
            serial: false,
            ordered_in_place: false,
            stats: EngineStats::default(),
        })
    }

    /// `clflush` waits for its own write-back (see [`crate::HwConfig::serial_persist`]).
    pub fn with_serial(mut self, on: bool) -> SWal {
        self.serial = on;
        self
    }

    /// The in-place stores are flushed and fenced at commit (see
    /// [`crate::HwConfig::ordered_in_place`]).
    pub fn with_ordered_in_place(mut self, on: bool) -> SWal {
        self.ordered_in_place = on;
        self
    }

    /// The log's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// A cached store.
    fn store(&mut self, addr: u64, data: &[u8]) -> Result<(), HwError> {
        for (line, _, off, n) in Core::pieces(addr, data.len()) {
            self.core.access(line)?;
            write_back_evicted(&mut self.core, &mut self.stats);
            let w = self.core.h.newest(line).expect("just accessed");
            self.core.h.meta_mut(w).dirty = true;
            self.core.set_view(addr + off as u64, &data[off..off + n]);
        }
        Ok(())
    }

    /// A cached load.
    fn load(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), HwError> {
        for (line, _, off, n) in Core::pieces(addr, buf.len()) {
            self.core.access(line)?;
            write_back_evicted(&mut self.core, &mut self.stats);
            self.core.view(addr + off as u64, &mut buf[off..off + n]);
        }
        Ok(())
    }

    /// An access of the write set (an L1 hit: issue and one cycle).
    fn write_set_access(&mut self) {
        self.core.protocol_cycles(2);
    }

    /// `clflush`: writes the line back if dirty and drops it from every level.
    fn clflush(&mut self, line: u64) {
        self.core.instruction();
        self.stats.clflushes += 1;
        if let Some(w) = self.core.h.newest(line) {
            if self.core.h.meta(w).dirty {
                let now = self.core.m.cycles();
                let data = self.core.line_data(line);
                let done = self.core.m.port_write(now, line * LINE, &data);
                self.flushed_until = self.flushed_until.max(done);
                if self.serial {
                    self.core.persist_wait(done, Wait::Fence);
                }
            }
            self.core.h.drop_way(w);
        }
    }

    /// `mfence`: waits for every `clflush` before it.
    fn mfence(&mut self) {
        self.core.instruction();
        self.stats.barriers += 1;
        let t = self.flushed_until;
        self.core.persist_wait(t, Wait::Fence);
    }

    fn write_head(&mut self, head: Head) {
        let b = self.layout.encode_head(&head);
        let base = self.layout.base;
        self.store(base, &b)
            .expect("the baseline hierarchy never overflows");
        self.clflush(base / LINE);
        self.mfence();
        self.head = head;
        self.stats.log_writes += 1;
    }

    /// Opens a new group at the next sequence number (checkpointing if the log is full).
    fn open_group(&mut self) -> Result<u64, HwError> {
        let seq = self.next_group_seq()?;
        // The whole metadata line: tags of a group this place held a lap ago must not
        // survive into this one.
        let mut meta = [0u8; 64];
        meta[..8].copy_from_slice(&seq.to_le_bytes());
        let ga = self.layout.group_addr(seq);
        self.store(ga, &meta)?;
        Ok(seq)
    }

    /// The next group's sequence number (checkpointing if the log is full).
    fn next_group_seq(&mut self) -> Result<u64, HwError> {
        if self.next_seq + 1 - self.head.start_seq > self.layout.ngroups {
            self.checkpoint(self.logged.len());
            if self.next_seq + 1 - self.head.start_seq > self.layout.ngroups {
                return Err(HwError::LogFull);
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        Ok(seq)
    }

    /// A slot for `line`'s log copy, holding the line as it is.
    fn new_slot(&mut self, line: u64) -> Result<(u64, usize), HwError> {
        let id = self
            .active
            .as_ref()
            .and_then(|a| a.id)
            .expect("an ID was taken");
        let open = self.active.as_ref().and_then(|a| a.groups.last().copied());
        let (seq, i) = match open {
            Some((seq, used)) if used < SLOTS => (seq, used),
            _ => (self.open_group()?, 0),
        };
        let ga = self.layout.group_addr(seq);
        let mut b = [0u8; 64];
        self.load(line * LINE, &mut b)?;
        self.store(ga + (i as u64 + 1) * LINE, &b)?;
        let tag = BlkTag {
            kind: SlotKind::Data,
            tx: id as u8,
            cnt: 0,
            line: line as u32,
        };
        self.store(ga + 8 * (i as u64 + 1), &tag.encode().to_le_bytes())?;
        let a = self.active.as_mut().expect("running");
        match a.groups.last_mut() {
            Some(g) if g.0 == seq => g.1 += 1,
            _ => a.groups.push((seq, 1)),
        }
        a.slots.insert(line, (seq, i));
        a.set.insert(line, b);
        a.lines.push(line);
        self.stats.log_lines += 1;
        Ok((seq, i))
    }

    /// Checkpoints the `n` oldest logged transactions and moves the head past them.
    fn checkpoint(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.stats.checkpoints += 1;
        let mut lines: Vec<u64> = self
            .logged
            .iter()
            .take(n)
            .flat_map(|t| t.lines.clone())
            .collect();
        lines.sort_unstable();
        lines.dedup();
        for line in lines {
            self.clflush(line);
        }
        self.mfence();
        self.logged.drain(..n);
        let running = self
            .active
            .as_ref()
            .and_then(|a| Some((a.groups.first()?.0, a.id?)));
        let head = match (self.logged.front(), running) {
            (Some(t), _) => Head {
                start_seq: t.first_seq,
                base_tx: t.id,
            },
            (None, Some((seq, id))) => Head {
                start_seq: seq,
                base_tx: id,
            },
            (None, None) => Head {
                start_seq: self.next_seq,
                base_tx: self.next_tx,
            },
        };
        self.write_head(head);
    }

    /// Persists the running transaction's groups, then its commit record. The
    /// transaction stays the running one meanwhile: a checkpoint forced by a full log
    /// keeps its groups in the valid log.
    fn commit_log(&mut self, id: u64) -> Result<(), HwError> {
        let groups = self.active.as_ref().expect("running").groups.clone();
        for &(seq, used) in &groups {
            let ga = self.layout.group_addr(seq);
            for k in 0..=used as u64 {
                self.clflush(ga / LINE + k);
            }
        }
        self.mfence();
        // The commit record: a group of one metadata line whose tag commits the
        // transaction, stored whole.
        let seq = self.next_group_seq()?;
        let tag = BlkTag {
            kind: SlotKind::Commit,
            tx: id as u8,
            cnt: 0,
            line: 0,
        };
        let mut meta = [0u8; 64];
        meta[..8].copy_from_slice(&seq.to_le_bytes());
        meta[8..16].copy_from_slice(&tag.encode().to_le_bytes());
        let ga = self.layout.group_addr(seq);
        self.store(ga, &meta)?;
        self.clflush(ga / LINE);
        self.mfence();
        self.stats.log_writes += groups.iter().map(|g| g.1 as u64 + 1).sum::<u64>() + 1;
        Ok(())
    }
}

impl Engine for SWal {
    fn core(&self) -> &Core {
        &self.core
    }

    fn core_mut(&mut self) -> &mut Core {
        &mut self.core
    }

    fn begin(&mut self) -> Result<(), HwError> {
        let per_tx = self.core.compute.per_tx;
        self.core.compute(per_tx);
        self.active = Some(Active::default());
        Ok(())
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), HwError> {
        let c = self.core.compute.per_access;
        self.core.compute(c);
        for (line, in_line, off, n) in Core::pieces(addr, buf.len()) {
            let own = self.active.as_ref().and_then(|a| a.set.get(&line).copied());
            match own {
                Some(b) => {
                    self.write_set_access();
                    buf[off..off + n].copy_from_slice(&b[in_line..in_line + n]);
                }
                None => self.load(addr + off as u64, &mut buf[off..off + n])?,
            }
        }
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), HwError> {
        let c = self.core.compute.per_access;
        self.core.compute(c);
        if self.active.as_ref().is_some_and(|a| a.id.is_none()) {
            if self.logged.len() as u64 + 1 > TRACKED_TXS {
                self.checkpoint(TRACKED_TXS as usize / 2);
            }
            self.active.as_mut().expect("running").id = Some(self.next_tx);
            self.next_tx += 1;
        }
        for (line, in_line, off, n) in Core::pieces(addr, data.len()) {
            let slot = self
                .active
                .as_ref()
                .and_then(|a| a.slots.get(&line).copied());
            let (seq, i) = match slot {
                Some(s) => s,
                None => self.new_slot(line)?,
            };
            let slot_addr = self.layout.group_addr(seq) + (i as u64 + 1) * LINE;
            self.store(slot_addr + in_line as u64, &data[off..off + n])?;
            self.write_set_access();
            let a = self.active.as_mut().expect("running");
            let b = a.set.get_mut(&line).expect("a slot has a write-set entry");
            b[in_line..in_line + n].copy_from_slice(&data[off..off + n]);
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<Option<u64>, HwError> {
        let Some(id) = self.active.as_ref().and_then(|a| a.id) else {
            self.active = None;
            return Ok(None);
        };
        self.commit_log(id)?;
        let a = self
            .active
            .take()
            .expect("the interface checks a transaction runs");
        for &line in &a.lines {
            self.write_set_access();
            let b = a.set[&line];
            self.store(line * LINE, &b)?;
        }
        if self.ordered_in_place {
            for &line in &a.lines {
                self.clflush(line);
            }
            self.mfence();
        }
        let first_seq = a.groups.first().map_or(self.next_seq, |g| g.0);
        self.logged.push_back(Logged {
            id,
            first_seq,
            lines: a.lines,
        });
        self.stats.write_commits += 1;
        self.stats.windows += 1;
        self.last_committed = id;
        Ok(Some(id))
    }

    fn abort(&mut self) -> Result<(), HwError> {
        self.active = None;
        self.stats.aborts += 1;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), HwError> {
        Ok(())
    }

    fn durable_hw(&self) -> u64 {
        self.last_committed
    }

    fn stats(&self) -> EngineStats {
        self.stats.clone()
    }

    fn shutdown(mut self: Box<Self>) -> Result<Machine, HwError> {
        self.active = None;
        let n = self.logged.len();
        self.checkpoint(n);
        write_back_all(&mut self.core, &mut self.stats);
        Ok(self.core.m)
    }
}
