//! The hardware's log writer: fills block groups with the blocks and records the
//! protocol hands it and queues each group at the memory controller as one atomic write
//! (LOC's Commit/Recovery Logic writing the Memory Log Area, §IV-B).
//!
//! Under the Line reading a group is filled slot by slot and issued when its seventh
//! slot fills or when the protocol needs its blocks persistent (a commit, the end of a
//! speculation window); a partly filled group is issued as it is (metadata and the
//! filled slots only) and the next block opens a new group, so no group is ever
//! written twice. Under the Word reading every group is complete when made and is
//! issued at once.

use pmlab_model::Machine;
use pmlab_spine::LINE;

use super::format::{
    BlkTag, GroupKind, Head, Layout, Reading, Record, SLOTS, SlotKind, WordTag, set_word,
};

/// The log has no room for another group: the protocol must truncate first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFull;

/// What the writer counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LogStats {
    /// Groups written.
    pub groups: u64,
    /// Memory line writes of groups (metadata and slots).
    pub lines: u64,
    /// Data blocks logged.
    pub blocks: u64,
    /// Records logged.
    pub records: u64,
    /// Head writes.
    pub heads: u64,
}

#[derive(Clone, Debug)]
enum Slot {
    Data { tag: BlkTag, data: [u8; 64] },
    Records(Vec<u64>),
}

/// The log writer of one protocol instance.
#[derive(Clone, Debug)]
pub struct LogWriter {
    layout: Layout,
    next_seq: u64,
    head: Head,
    open: Vec<Slot>,
    max_done: u64,
    /// One group in flight at a time (strict persistence, serialized).
    serial: bool,
    stats: LogStats,
}

impl LogWriter {
    /// A writer continuing after `head` (the head a format or a recovery wrote).
    pub fn new(layout: Layout, head: Head) -> LogWriter {
        LogWriter {
            layout,
            next_seq: head.start_seq,
            head,
            open: Vec::new(),
            max_done: 0,
            serial: false,
            stats: LogStats::default(),
        }
    }

    /// Issues each group only once the one before it completed (see
    /// [`crate::HwConfig::serial_persist`]).
    pub fn with_serial(mut self, on: bool) -> LogWriter {
        self.serial = on;
        self
    }

    /// Writes a fresh head (an empty log whose first transaction is `base_tx`) and
    /// waits for it: formatting.
    pub fn format(m: &mut Machine, layout: Layout, base_tx: u64) -> LogWriter {
        let head = Head {
            start_seq: 0,
            base_tx,
        };
        let mut w = LogWriter::new(layout, head);
        let done = w.write_head(m, m.cycles(), head);
        m.persist_barrier(done);
        w
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Counters so far.
    pub fn stats(&self) -> &LogStats {
        &self.stats
    }

    /// The head last written.
    pub fn head(&self) -> Head {
        self.head
    }

    /// Sequence number of the next group (the open one, if a group is open).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The latest completion of any group issued so far.
    pub fn max_done(&self) -> u64 {
        self.max_done
    }

    /// Groups that can still be opened before the log is full.
    pub fn free_groups(&self) -> u64 {
        let used = self.next_seq - self.head.start_seq + u64::from(!self.open.is_empty());
        self.layout.ngroups.saturating_sub(used)
    }

    /// Whether `lines` logged lines and `records` records fit.
    pub fn fits(&self, lines: u64, records: u64) -> bool {
        let groups = match self.layout.reading {
            Reading::Line => (lines + records.div_ceil(8)).div_ceil(SLOTS as u64) + 1,
            Reading::Word => 2 * lines + records.div_ceil(SLOTS as u64),
        };
        groups <= self.free_groups()
    }

    /// Logs the line `line` (its bytes `data`) for transaction `tx`, carrying `cnt` (the
    /// transaction's block count on its last block, else 0), issued at cycle `at`.
    pub fn add_line(
        &mut self,
        m: &mut Machine,
        at: u64,
        tx: u64,
        cnt: u16,
        line: u64,
        data: &[u8; 64],
    ) -> Result<(), LogFull> {
        self.stats.blocks += u64::from(self.layout.blocks_per_line());
        match self.layout.reading {
            Reading::Line => {
                let tag = BlkTag {
                    kind: SlotKind::Data,
                    tx: tx as u8,
                    cnt,
                    line: line as u32,
                };
                self.push_slot(m, at, Slot::Data { tag, data: *data })
            }
            Reading::Word => {
                if self.free_groups() < 2 {
                    return Err(LogFull);
                }
                let mut lo = [0u8; 64];
                lo[8..].copy_from_slice(&data[..56]);
                let mut hi = [0u8; 64];
                hi[8..16].copy_from_slice(&data[56..]);
                self.issue_word(m, at, GroupKind::DataLow, tx, 0, line, lo);
                self.issue_word(m, at, GroupKind::DataHigh, tx, cnt, line, hi);
                Ok(())
            }
        }
    }

    /// Logs records, issued at cycle `at`.
    pub fn add_records(
        &mut self,
        m: &mut Machine,
        at: u64,
        records: &[Record],
    ) -> Result<(), LogFull> {
        self.stats.records += records.len() as u64;
        let words: Vec<u64> = records.iter().map(Record::encode).collect();
        match self.layout.reading {
            Reading::Line => {
                for chunk in words.chunks(8) {
                    self.push_slot(m, at, Slot::Records(chunk.to_vec()))?;
                }
            }
            Reading::Word => {
                if self.free_groups() < (words.len() as u64).div_ceil(SLOTS as u64) {
                    return Err(LogFull);
                }
                for chunk in words.chunks(SLOTS) {
                    let mut b = [0u8; 64];
                    for (i, w) in chunk.iter().enumerate() {
                        set_word(&mut b, i + 1, *w);
                    }
                    self.issue_word(m, at, GroupKind::Records, 0, 0, 0, b);
                }
            }
        }
        Ok(())
    }

    fn push_slot(&mut self, m: &mut Machine, at: u64, slot: Slot) -> Result<(), LogFull> {
        if self.open.is_empty() && self.free_groups() == 0 {
            return Err(LogFull);
        }
        self.open.push(slot);
        if self.open.len() == SLOTS {
            self.issue_open(m, at);
        }
        Ok(())
    }

    /// Issues the open group (if any) at cycle `at`; returns the latest completion of
    /// every group issued so far.
    pub fn flush(&mut self, m: &mut Machine, at: u64) -> u64 {
        if !self.open.is_empty() {
            self.issue_open(m, at);
        }
        self.max_done
    }

    fn issue_open(&mut self, m: &mut Machine, at: u64) {
        let slots = std::mem::take(&mut self.open);
        let mut bytes = vec![0u8; (slots.len() + 1) * LINE as usize];
        set_word(&mut bytes, 0, self.next_seq);
        for (i, s) in slots.iter().enumerate() {
            let (tag, line) = match s {
                Slot::Data { tag, data } => (*tag, *data),
                Slot::Records(ws) => {
                    let mut b = [0u8; 64];
                    for (j, w) in ws.iter().enumerate() {
                        set_word(&mut b, j, *w);
                    }
                    let tag = BlkTag {
                        kind: SlotKind::Records,
                        tx: 0,
                        cnt: 0,
                        line: 0,
                    };
                    (tag, b)
                }
            };
            set_word(&mut bytes, i + 1, tag.encode());
            let o = (i + 1) * LINE as usize;
            bytes[o..o + LINE as usize].copy_from_slice(&line);
        }
        let addr = self.layout.group_addr(self.next_seq);
        self.issue(m, at, addr, &bytes);
    }

    #[allow(clippy::too_many_arguments)]
    fn issue_word(
        &mut self,
        m: &mut Machine,
        at: u64,
        kind: GroupKind,
        tx: u64,
        cnt: u16,
        line: u64,
        mut b: [u8; 64],
    ) {
        let tag = WordTag {
            kind,
            tx: tx as u8,
            cnt,
            line: line as u32,
            lap: self.layout.lap(self.next_seq) as u8,
        };
        set_word(&mut b, 0, tag.encode());
        let addr = self.layout.group_addr(self.next_seq);
        self.issue(m, at, addr, &b);
    }

    fn issue(&mut self, m: &mut Machine, at: u64, addr: u64, bytes: &[u8]) {
        let done = if self.serial {
            m.port_write_serial(at.max(self.max_done), addr, bytes)
        } else {
            m.port_write(at, addr, bytes)
        };
        // The log area is not the program's: keep the coherent image equal to memory.
        m.coherent_write(addr, bytes);
        self.max_done = self.max_done.max(done);
        self.next_seq += 1;
        self.stats.groups += 1;
        self.stats.lines += bytes.len() as u64 / LINE;
    }

    /// Writes a new head at cycle `at` (the valid log now starts at `head.start_seq`);
    /// returns its completion.
    pub fn write_head(&mut self, m: &mut Machine, at: u64, head: Head) -> u64 {
        let b = self.layout.encode_head(&head);
        let done = m.port_write(at, self.layout.base, &b);
        m.coherent_write(self.layout.base, &b);
        self.head = head;
        self.stats.heads += 1;
        done
    }
}
