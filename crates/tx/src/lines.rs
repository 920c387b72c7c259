//! Flushing sets of ranges line by line, each line once.

use pmlab_spine::{Addr, FlushKind, LINE, Memory, SpineError};

/// The cache lines a set of writes touched; flushing it writes back each line once,
/// merging runs of adjacent lines into one flush call.
///
/// Kept as line ranges, sorted and merged only when flushed: a redo commit of whole
/// metadata pages adds sixty-four lines per page twice (log and home), and a set of
/// single lines made every one of them a tree insertion.
#[derive(Debug, Default, Clone)]
pub(crate) struct LineSet {
    /// `[first, last]` line numbers, in the order added; may overlap.
    ranges: Vec<(u64, u64)>,
}

/// Flushes (`clwb`) the lines of the writes `writes()` yields once each: in one pass, merging adjacent
/// and overlapping lines into one flush call, while the writes come in ascending
/// order; through a [`LineSet`] if they do not. The caller fences.
pub(crate) fn flush_writes<'d, M, I>(mem: &mut M, writes: impl Fn() -> I) -> Result<(), SpineError>
where
    M: Memory + ?Sized,
    I: Iterator<Item = (Addr, &'d [u8])>,
{
    let ascending = writes()
        .filter(|(_, d)| !d.is_empty())
        .map(|(a, _)| a)
        .is_sorted();
    if !ascending {
        let mut set = LineSet::default();
        for (addr, data) in writes() {
            set.add(addr, data.len() as u64);
        }
        return set.flush(mem);
    }
    let lines = writes()
        .filter(|(_, d)| !d.is_empty())
        .map(|(addr, data)| (addr / LINE, (addr + data.len() as u64 - 1) / LINE));
    flush_sorted(mem, lines)
}

/// Flushes `[first, last]` line ranges sorted by their first line, each line once:
/// overlapping or adjacent ranges make one flush call. The last line of a space whose
/// size is not a multiple of LINE is partial.
fn flush_sorted<M: Memory + ?Sized>(
    mem: &mut M,
    ranges: impl Iterator<Item = (u64, u64)>,
) -> Result<(), SpineError> {
    let size = mem.size();
    let flush_run = |mem: &mut M, first: u64, last: u64| {
        let start = first * LINE;
        let end = ((last + 1) * LINE).min(size);
        mem.flush(start, end - start, FlushKind::Clwb)
    };
    let mut run: Option<(u64, u64)> = None;
    for (first, last) in ranges {
        run = match run {
            Some((f, l)) if first <= l + 1 => Some((f, l.max(last))),
            Some((f, l)) => {
                flush_run(mem, f, l)?;
                Some((first, last))
            }
            None => Some((first, last)),
        };
    }
    match run {
        Some((f, l)) => flush_run(mem, f, l),
        None => Ok(()),
    }
}

impl LineSet {
    /// Adds the lines overlapping `[addr, addr + len)`.
    pub(crate) fn add(&mut self, addr: Addr, len: u64) {
        if len == 0 {
            return;
        }
        self.ranges.push((addr / LINE, (addr + len - 1) / LINE));
    }

    /// Whether no line was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Flushes every line (`clwb`) once, in address order; the caller fences.
    pub(crate) fn flush<M: Memory + ?Sized>(&self, mem: &mut M) -> Result<(), SpineError> {
        let mut ranges = self.ranges.clone();
        ranges.sort_unstable();
        flush_sorted(mem, ranges.into_iter())
    }
}

/// Checks that a log of `structure` at `[base, base + len)` is line-aligned, can hold a
/// header line and one record line, and lies inside `mem`.
pub(crate) fn check_log_area<M: Memory + ?Sized>(
    structure: &'static str,
    mem: &M,
    base: Addr,
    len: u64,
) -> Result<(), crate::TxError> {
    let bad = |problem: String| crate::TxError::BadArea {
        structure,
        addr: base,
        problem,
    };
    if base % LINE != 0 {
        return Err(bad(format!("base is not {LINE}-byte aligned")));
    }
    if len < 2 * LINE {
        return Err(bad(format!(
            "{len} bytes cannot hold a header and a record"
        )));
    }
    pmlab_spine::check_bounds(base, len, mem.size())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmlab_spine::VecMemory;

    /// A memory that records each flush call, to see which lines went and how often.
    struct Calls(VecMemory, Vec<(u64, u64)>);

    impl Memory for Calls {
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
            self.0.read(addr, buf)
        }
        fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
            self.0.write(addr, data)
        }
        fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
            self.1.push((addr, len));
            self.0.flush(addr, len, kind)
        }
        fn fence(&mut self) {
            self.0.fence()
        }
        fn persist_counters(&self) -> pmlab_spine::PersistCounters {
            self.0.persist_counters()
        }
    }

    #[test]
    fn each_line_is_flushed_once_in_merged_runs() {
        let mut mem = Calls(VecMemory::new((64 * LINE + 10) as usize), Vec::new());
        let mut set = LineSet::default();
        set.add(10 * LINE + 5, 3 * LINE); // lines 10..=13
        set.add(2 * LINE, 1); // line 2
        set.add(12 * LINE, 4 * LINE); // lines 12..=15, overlapping the first
        set.add(16 * LINE, 1); // line 16, adjacent to the run before
        set.add(3 * LINE, 0); // nothing
        set.add(64 * LINE, 10); // the partial last line
        set.flush(&mut mem).unwrap();
        assert_eq!(
            mem.1,
            vec![(2 * LINE, LINE), (10 * LINE, 7 * LINE), (64 * LINE, 10)]
        );
        assert_eq!(mem.persist_counters().flushes, 1 + 7 + 1);
    }
}
