//! A memory that tracks, line by line, what is durable — and enumerates the images a
//! crash could leave at every persist point.
//!
//! This is the crash harness the structures in this crate are tested with; it needs
//! nothing but the spine, so other crates can use it too. The rules follow the x86
//! persistency model at cache-line granularity:
//!
//! - a store makes its lines dirty; every content a dirty line has held since it was
//!   last known durable is a *version* that an eviction could have written back;
//! - `clwb`/`clflushopt` of a dirty line remembers the version at that moment; the next
//!   fence makes that version durable (later stores stay dirty);
//! - `clflush` makes the line's current contents durable at once;
//! - at a crash, each dirty line independently holds its durable contents or any of
//!   its versions.
//!
//! Crash points are taken immediately before and after each fence and each `clflush`,
//! at the first memory operation after the workload changes its tag (under the old
//! tag), and whenever the workload calls [`CrashMemory::crash_point`]; between two persist
//! points the set of possible images only grows, so these points cover every crash.
//! At each point, images are enumerated exhaustively while there are at most
//! [`Explorer::exhaustive_limit`] of them; beyond that the explorer takes the all-old
//! and all-new images, each single line new, and [`Explorer::samples`] random
//! combinations drawn with xoshiro256++ seeded from [`Explorer::seed`] and the point's
//! index.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use pmlab_spine::{
    Addr, FlushKind, LINE, Memory, PersistCounters, SpineError, check_bounds, lines_spanned,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A memory that can say what would survive a crash now.
pub trait Crashable: Memory {
    /// The contents that are certainly durable: every line as of its last guaranteed
    /// write-back. (What else a crash may leave depends on the substrate.)
    fn durable_image(&self) -> Vec<u8>;
}

#[derive(Clone, Debug, Default)]
struct DirtyLine {
    /// Contents the line has held since it was last durable, oldest first.
    versions: Vec<Vec<u8>>,
    /// Index into `versions` of the version a weak flush captured, awaiting a fence.
    flushed: Option<usize>,
}

/// Where a crash image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashPoint {
    /// Index of the crash point (0, 1, 2, … in program order).
    pub index: u64,
    /// The workload's tag when the point was taken ([`CrashMemory::set_tag`]).
    pub tag: u64,
    /// Dirty lines at the point.
    pub dirty_lines: usize,
}

/// How many images to look at per crash point.
#[derive(Clone, Copy, Debug)]
pub struct Explorer {
    /// Enumerate all combinations when there are at most this many.
    pub exhaustive_limit: u64,
    /// Random combinations per point beyond that.
    pub samples: u32,
    /// Seed of the xoshiro256++ generator.
    pub seed: u64,
}

impl Default for Explorer {
    fn default() -> Self {
        Explorer {
            exhaustive_limit: 256,
            samples: 24,
            seed: 0x5eed,
        }
    }
}

/// Figures of an exploration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExploreStats {
    /// Crash points visited.
    pub points: u64,
    /// Crash images handed to the checker.
    pub images: u64,
    /// Points whose images were all enumerated.
    pub exhaustive_points: u64,
}

/// A handle that sets a [`CrashMemory`]'s tag while a transaction holds the memory
/// (mark "committing" just before `commit`, "committed" after it returns).
#[derive(Clone, Debug, Default)]
pub struct TagHandle(Rc<Cell<u64>>);

impl TagHandle {
    /// Sets the tag recorded with later crash points.
    pub fn set(&self, tag: u64) {
        self.0.set(tag);
    }

    /// The current tag.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

type Visitor<'a> = Box<dyn FnMut(CrashPoint, &[u8]) + 'a>;

/// A test memory with honest per-line durability and a crash explorer.
pub struct CrashMemory<'a> {
    current: Vec<u8>,
    durable: Vec<u8>,
    dirty: BTreeMap<u64, DirtyLine>,
    counters: PersistCounters,
    tag: TagHandle,
    /// The tag as of the last memory operation, to notice phase changes.
    seen_tag: u64,
    explorer: Explorer,
    visitor: Option<Visitor<'a>>,
    stats: ExploreStats,
}

impl<'a> CrashMemory<'a> {
    /// A zero-filled, fully durable memory of `size` bytes that explores nothing.
    pub fn new(size: usize) -> Self {
        Self::from_image(vec![0; size])
    }

    /// A memory whose current and durable contents are `image` (recovery runs on these).
    pub fn from_image(image: Vec<u8>) -> Self {
        CrashMemory {
            durable: image.clone(),
            current: image,
            dirty: BTreeMap::new(),
            counters: PersistCounters::default(),
            tag: TagHandle::default(),
            seen_tag: 0,
            explorer: Explorer::default(),
            visitor: None,
            stats: ExploreStats::default(),
        }
    }

    /// Starts exploring: from now on every crash point hands each of its images to
    /// `visit` (typically: recover on [`CrashMemory::from_image`], check, compare with
    /// the oracle for `point.tag`).
    pub fn explore(&mut self, explorer: Explorer, visit: impl FnMut(CrashPoint, &[u8]) + 'a) {
        self.explorer = explorer;
        self.visitor = Some(Box::new(visit));
    }

    /// Takes a last crash point, stops exploring and returns the figures.
    pub fn stop_exploring(&mut self) -> ExploreStats {
        self.crash_point();
        self.visitor = None;
        self.stats
    }

    /// Sets the tag recorded with later crash points (the workload's phase, e.g. how
    /// many transactions committed and whether one is committing).
    pub fn set_tag(&mut self, tag: u64) {
        self.tag.set(tag);
    }

    /// A handle to set the tag while the memory is borrowed.
    pub fn tag_handle(&self) -> TagHandle {
        self.tag.clone()
    }

    /// The current (volatile) contents.
    pub fn current(&self) -> &[u8] {
        &self.current
    }

    /// Takes a crash point now.
    pub fn crash_point(&mut self) {
        self.notice_phase_change();
        self.crash_point_tagged(self.tag.get());
    }

    /// A phase change (a new tag) is itself a crash point, under the old tag: a crash
    /// just before `commit` is called must find the old state.
    fn notice_phase_change(&mut self) {
        let now = self.tag.get();
        if now != self.seen_tag {
            self.crash_point_tagged(self.seen_tag);
            self.seen_tag = now;
        }
    }

    fn crash_point_tagged(&mut self, tag: u64) {
        let Some(mut visit) = self.visitor.take() else {
            return;
        };
        let index = self.stats.points;
        self.stats.points += 1;
        let lines: Vec<(u64, Vec<&[u8]>)> = self
            .dirty
            .iter()
            .map(|(&l, d)| {
                let s = (l * LINE) as usize;
                let e = (s + LINE as usize).min(self.durable.len());
                let mut choices: Vec<&[u8]> = vec![&self.durable[s..e]];
                choices.extend(d.versions.iter().map(|v| v.as_slice()));
                (l, choices)
            })
            .collect();
        let point = CrashPoint {
            index,
            tag,
            dirty_lines: lines.len(),
        };
        let total = lines
            .iter()
            .try_fold(1u64, |acc, (_, c)| acc.checked_mul(c.len() as u64))
            .filter(|&t| t <= self.explorer.exhaustive_limit);
        let mut image = self.durable.clone();
        let mut emit = |picks: &dyn Fn(usize, usize) -> usize, image: &mut Vec<u8>| {
            for (k, (l, choices)) in lines.iter().enumerate() {
                let s = (l * LINE) as usize;
                let c = choices[picks(k, choices.len())];
                image[s..s + c.len()].copy_from_slice(c);
            }
            visit(point, image);
        };
        let mut images = 0u64;
        if let Some(total) = total {
            self.stats.exhaustive_points += 1;
            for n in 0..total {
                // Mixed-radix digits of n pick one choice per line.
                let digits: Vec<usize> = {
                    let mut rest = n;
                    lines
                        .iter()
                        .map(|(_, c)| {
                            let d = (rest % c.len() as u64) as usize;
                            rest /= c.len() as u64;
                            d
                        })
                        .collect()
                };
                emit(&|k, _| digits[k], &mut image);
                images += 1;
            }
        } else {
            emit(&|_, _| 0, &mut image);
            emit(&|_, n| n - 1, &mut image);
            images += 2;
            for one in 0..lines.len() {
                emit(&|k, n| if k == one { n - 1 } else { 0 }, &mut image);
                images += 1;
            }
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(
                self.explorer.seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            );
            for _ in 0..self.explorer.samples {
                let digits: Vec<usize> = lines
                    .iter()
                    .map(|(_, c)| rng.gen_range(0..c.len()))
                    .collect();
                emit(&|k, _| digits[k], &mut image);
                images += 1;
            }
        }
        self.stats.images += images;
        self.visitor = Some(visit);
    }

    fn line_range(&self, l: u64) -> std::ops::Range<usize> {
        let s = (l * LINE) as usize;
        s..(s + LINE as usize).min(self.current.len())
    }

    fn make_durable(&mut self, l: u64, contents: Vec<u8>) {
        let r = self.line_range(l);
        self.durable[r].copy_from_slice(&contents);
    }
}

impl Memory for CrashMemory<'_> {
    fn size(&self) -> u64 {
        self.current.len() as u64
    }

    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        check_bounds(addr, buf.len() as u64, self.size())?;
        buf.copy_from_slice(&self.current[addr as usize..addr as usize + buf.len()]);
        Ok(())
    }

    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        check_bounds(addr, data.len() as u64, self.size())?;
        self.notice_phase_change();
        self.current[addr as usize..addr as usize + data.len()].copy_from_slice(data);
        if data.is_empty() {
            return Ok(());
        }
        for l in addr / LINE..=(addr + data.len() as u64 - 1) / LINE {
            let v = self.current[self.line_range(l)].to_vec();
            self.dirty.entry(l).or_default().versions.push(v);
        }
        Ok(())
    }

    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        check_bounds(addr, len, self.size())?;
        self.notice_phase_change();
        self.counters.flushes += lines_spanned(addr, len);
        if len == 0 {
            return Ok(());
        }
        let first = addr / LINE;
        let last = (addr + len - 1) / LINE;
        if kind == FlushKind::Clflush {
            self.crash_point();
            let lines: Vec<u64> = self.dirty.range(first..=last).map(|(&l, _)| l).collect();
            for l in lines {
                let v = self.current[self.line_range(l)].to_vec();
                self.make_durable(l, v);
                self.dirty.remove(&l);
            }
            self.crash_point();
        } else {
            for (_, d) in self.dirty.range_mut(first..=last) {
                d.flushed = Some(d.versions.len() - 1);
            }
        }
        Ok(())
    }

    fn fence(&mut self) {
        self.notice_phase_change();
        self.counters.fences += 1;
        self.crash_point();
        let flushed: Vec<(u64, usize)> = self
            .dirty
            .iter()
            .filter_map(|(&l, d)| d.flushed.map(|i| (l, i)))
            .collect();
        for (l, i) in flushed {
            let d = self.dirty.get_mut(&l).expect("listed above");
            let v = d.versions[i].clone();
            d.versions.drain(..=i);
            d.flushed = None;
            if d.versions.is_empty() {
                self.dirty.remove(&l);
            }
            self.make_durable(l, v);
        }
        self.crash_point();
    }

    fn persist_counters(&self) -> PersistCounters {
        self.counters
    }
}

impl Crashable for CrashMemory<'_> {
    fn durable_image(&self) -> Vec<u8> {
        self.durable.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn unflushed_store_may_or_may_not_survive() {
        let seen = RefCell::new(Vec::new());
        let mut m = CrashMemory::new(256);
        m.explore(Explorer::default(), |_, img| {
            seen.borrow_mut().push(img[70])
        });
        m.write(70, &[1]).unwrap();
        m.crash_point();
        drop(m);
        assert_eq!(*seen.borrow(), vec![0, 1]);
    }

    #[test]
    fn flush_and_fence_make_durable() {
        let mut m = CrashMemory::new(256);
        m.write(0, &[5; 8]).unwrap();
        m.flush(0, 8, FlushKind::Clwb).unwrap();
        m.write(1, &[6]).unwrap();
        assert_eq!(m.durable_image()[0], 0);
        m.fence();
        let d = m.durable_image();
        assert_eq!(
            &d[0..3],
            &[5, 5, 5],
            "the flushed version is durable, the later store is not"
        );
        assert_eq!(
            m.persist_counters(),
            PersistCounters {
                flushes: 1,
                fences: 1
            }
        );
        m.flush(0, 1, FlushKind::Clflush).unwrap();
        assert_eq!(m.durable_image()[1], 6);
    }

    #[test]
    fn every_version_is_a_choice() {
        let seen = RefCell::new(std::collections::BTreeSet::new());
        let mut m = CrashMemory::new(128);
        m.explore(Explorer::default(), |_, img| {
            seen.borrow_mut().insert((img[0], img[64]));
        });
        m.write(0, &[1]).unwrap();
        m.write(0, &[2]).unwrap();
        m.write(64, &[9]).unwrap();
        let stats = m.stop_exploring();
        assert_eq!(stats.images, 6);
        let expect: std::collections::BTreeSet<_> =
            [(0, 0), (1, 0), (2, 0), (0, 9), (1, 9), (2, 9)]
                .into_iter()
                .collect();
        assert_eq!(*seen.borrow(), expect);
    }
}
