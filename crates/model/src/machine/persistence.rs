//! The persistence side of the machine: write-backs into the durable image, flushes,
//! fences, non-temporal stores, chaos mode, crashes and recording.

use pmlab_spine::{Addr, FlushKind, LINE, Memory, SpineError, check_bounds};
use rand::Rng;

use super::Machine;
use crate::persist::{Event, PointKind};
use crate::recording::{Recording, RecordingOverflow};

/// What one recording may hold by default: 1 GiB of events.
pub const DEFAULT_RECORDING_LIMIT: u64 = 1 << 30;
/// Bytes an event costs beyond its data (its tag, address and allocation).
const RECORDED_EVENT_COST: u64 = 32;

impl Machine {
    /// Cleans the line (invalidating it if `invalidate`) in the hierarchy and returns
    /// the ranges that must reach memory: what the hierarchy wrote back, plus the line
    /// itself if it is dirty and no reported write covers it (blocks may be larger than
    /// a line, and the durable image must never depend on the hierarchy's bookkeeping
    /// alone). Give the vector back with [`Machine::recycle`].
    fn line_writebacks(&mut self, line: u64, invalidate: bool) -> Vec<(u64, u32)> {
        let addr = line * LINE;
        self.caches.flush_block(addr, invalidate);
        let mut w = std::mem::take(&mut self.wbuf);
        self.caches.drain_memory_writes(&mut w);
        let covered = w
            .iter()
            .any(|&(a, l)| a <= addr && addr + LINE <= a + u64::from(l));
        if self.dirty.contains(line) && !covered {
            w.push((addr, LINE as u32));
        }
        w
    }

    fn recycle(&mut self, mut w: Vec<(u64, u32)>) {
        w.clear();
        self.wbuf = w;
    }

    /// Crashes the machine: exactly the durable image. Deterministic: the pending
    /// write-backs (issued `clwb`/`clflushopt` and non-temporal stores not yet ordered
    /// by a fence) are NOT applied — none of them arrived. [`Machine::crash_with`] and
    /// [`Recording::explore`] try the other outcomes.
    pub fn crash(&self) -> Vec<u8> {
        self.durable.image().to_vec()
    }

    /// Crashes the machine with each pending write-back reaching memory with
    /// probability 1/2, drawn from `rng`.
    pub fn crash_with(&self, rng: &mut impl Rng) -> Vec<u8> {
        let n = self.durable.pending().len();
        let chosen: Vec<usize> = (0..n).filter(|_| rng.r#gen::<bool>()).collect();
        self.durable.image_with(chosen.into_iter())
    }

    /// Writes back every dirty line and fences: afterwards the durable image equals
    /// the current one. Counted like the `clwb`s and fence it stands for.
    pub fn persist_all(&mut self) {
        let mut lines: Vec<u64> = self.dirty.iter().collect();
        lines.sort_unstable();
        for line in lines {
            self.flush_physical_line(line * LINE, FlushKind::Clwb);
        }
        self.fence_inner();
    }

    /// Starts recording durable-state events for crash exploration.
    pub fn start_recording(&mut self) {
        self.recording_base = Some(self.durable.clone());
        self.recording = Some(vec![Event::Point(PointKind::Start)]);
        self.recorded_bytes = 0;
        self.recording_overflow = None;
    }

    /// Bounds what one recording may hold, in bytes of events (written-back data plus a
    /// fixed cost per event); default [`DEFAULT_RECORDING_LIMIT`]. A recording that
    /// reaches it stops, and exploring it reports [`crate::RecordingOverflow`].
    pub fn set_recording_limit(&mut self, bytes: u64) {
        self.recording_limit = bytes;
    }

    /// Stops recording and returns the recording (empty if none was started).
    pub fn stop_recording(&mut self) -> Recording {
        let mut events = self.recording.take().unwrap_or_default();
        events.push(Event::Point(PointKind::End));
        let base = self
            .recording_base
            .take()
            .unwrap_or_else(|| self.durable.clone());
        Recording::new(base, events, self.recording_overflow.take())
    }

    /// Runs `f` on this machine while recording, for [`Recording::explore`].
    pub fn record<R>(&mut self, f: impl FnOnce(&mut Machine) -> R) -> (R, Recording) {
        self.start_recording();
        let r = f(self);
        (r, self.stop_recording())
    }

    pub(super) fn log(&mut self, event: Event) {
        let Some(r) = &mut self.recording else {
            return;
        };
        if self.recording_overflow.is_some() {
            return;
        }
        let size = RECORDED_EVENT_COST
            + match &event {
                Event::Write { data, .. } | Event::Pending { data, .. } => data.len() as u64,
                Event::Fence | Event::Point(_) => 0,
            };
        if self.recorded_bytes + size > self.recording_limit {
            self.recording_overflow = Some(RecordingOverflow {
                limit: self.recording_limit,
                events: r.len(),
            });
            return;
        }
        self.recorded_bytes += size;
        r.push(event);
    }

    pub(super) fn point(&mut self, kind: PointKind) {
        self.log(Event::Point(kind));
    }

    /// `[addr, addr + len)` of the current image reaches memory.
    pub(super) fn write_durable(&mut self, addr: u64, len: u64) {
        let (a, l) = (addr as usize, len as usize);
        self.device.note_write(addr, len);
        self.durable.write(addr, &self.current[a..a + l]);
        if self.recording.is_some() {
            let data = self.current[a..a + l].into();
            self.log(Event::Write { addr, data });
        }
        self.settle_lines(addr, len);
    }

    /// After a write to memory, a line stays dirty only if memory still differs.
    pub(super) fn settle_lines(&mut self, addr: u64, len: u64) {
        for line in addr / LINE..=(addr + len - 1) / LINE {
            let a = (line * LINE) as usize;
            let r = a..a + LINE as usize;
            let same = self.current[r.clone()] == self.durable.image()[r];
            if self.dirty.contains(line) && same {
                self.dirty.remove(line);
            }
            // What crash images rest on: a line that is not dirty holds what memory holds.
            debug_assert!(
                same || self.dirty.contains(line),
                "line {line} differs from memory but is not dirty"
            );
        }
    }

    /// Chaos mode: maybe write back one random dirty line.
    pub(super) fn chaos_tick(&mut self) {
        let Some(chaos) = &mut self.chaos else { return };
        if self.dirty.len() == 0 || !chaos.rng.gen_bool(chaos.probability) {
            return;
        }
        let line = self.dirty.get(chaos.rng.gen_range(0..self.dirty.len()));
        // The hierarchy cleans the line, so a later eviction does not write it again.
        let w = self.line_writebacks(line, false);
        for &(a, l) in &w {
            self.write_durable(a, u64::from(l));
        }
        self.recycle(w);
        self.dirty.remove(line);
        self.stats.chaos_writebacks += 1;
        self.point(PointKind::Chaos);
    }

    /// Flushes the line holding physical address `paddr`.
    pub(super) fn flush_physical_line(&mut self, paddr: u64, kind: FlushKind) {
        let line = paddr / LINE;
        self.stats.instructions += 1;
        self.stats.cycles += self.config.persist.flush_issue_cycles;
        self.stats.flushes_by_kind[match kind {
            FlushKind::Clflush => 0,
            FlushKind::Clflushopt => 1,
            FlushKind::Clwb => 2,
        }] += 1;
        let w = self.line_writebacks(line, kind != FlushKind::Clwb);
        if !w.is_empty() {
            self.stats.flush_writebacks += 1;
        }
        for &(addr, len) in &w {
            let len = u64::from(len);
            match kind {
                FlushKind::Clflush => {
                    // Ordered: the write-back completes before the next instruction.
                    self.stats.cycles += self.write_cycles;
                    self.write_durable(addr, len);
                }
                FlushKind::Clflushopt | FlushKind::Clwb => {
                    let (a, l) = (addr as usize, len as usize);
                    self.device.note_write(addr, len);
                    self.durable.add_pending(addr, &self.current[a..a + l]);
                    if self.recording.is_some() {
                        let data = self.current[a..a + l].into();
                        self.log(Event::Pending { addr, data });
                    }
                    self.outstanding += 1;
                    // The line left the caches clean: it is no longer dirty, though
                    // durable only at the fence.
                    for l in addr / LINE..=(addr + len - 1) / LINE {
                        self.dirty.remove(l);
                    }
                }
            }
        }
        self.recycle(w);
        self.point(PointKind::Flush);
    }

    /// A non-temporal store (`movnti`/`movntdq`): the bytes bypass the caches through a
    /// write-combining buffer and, like a `clwb`, are durable only at the next fence
    /// (until then they are pending). A cached copy of the line is written back if dirty
    /// and invalidated first, as x86 does. Not part of the spine: an extension for
    /// protocols that log with streaming stores (OSP counts such write-combining buffer
    /// flushes among its CPU flushes, §3.1).
    pub fn write_nt(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        self.chaos_tick();
        for (va, off, n) in Self::line_pieces(addr, data.len() as u64) {
            let pa = self.translate(va)?;
            let line = pa / LINE;
            self.stats.instructions += 1;
            self.stats.cycles += 1;
            self.stats.nt_stores += 1;
            let w = self.line_writebacks(line, true);
            for &(a, l) in &w {
                self.stats.eviction_writes += 1;
                self.write_durable(a, u64::from(l));
            }
            self.recycle(w);
            let p = pa as usize;
            self.current[p..p + n].copy_from_slice(&data[off..off + n]);
            self.device.note_write(pa, n as u64);
            self.durable.add_pending(pa, &data[off..off + n]);
            if self.recording.is_some() {
                let data = data[off..off + n].into();
                self.log(Event::Pending { addr: pa, data });
            }
            self.outstanding += 1;
            self.point(PointKind::Store);
        }
        Ok(())
    }

    pub(super) fn fence_inner(&mut self) {
        self.stats.instructions += 1;
        self.stats.fences += 1;
        let banks = self.config.device.banks;
        // The fence waits for the outstanding write-backs, `banks` at a time.
        self.stats.cycles +=
            self.config.persist.fence_cycles + self.outstanding.div_ceil(banks) * self.write_cycles;
        self.outstanding = 0;
        self.durable.fence();
        self.log(Event::Fence);
        self.point(PointKind::Fence);
    }
}
