//! Flushing sets of ranges line by line, each line once.

use std::collections::BTreeSet;

use pmlab_spine::{Addr, FlushKind, LINE, Memory, SpineError};

/// The cache lines a set of writes touched; flushing it writes back each line once,
/// merging runs of adjacent lines into one flush call.
#[derive(Debug, Default, Clone)]
pub(crate) struct LineSet {
    lines: BTreeSet<u64>,
}

impl LineSet {
    /// Adds the lines overlapping `[addr, addr + len)`.
    pub(crate) fn add(&mut self, addr: Addr, len: u64) {
        if len == 0 {
            return;
        }
        for l in addr / LINE..=(addr + len - 1) / LINE {
            self.lines.insert(l);
        }
    }

    /// Whether no line was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Flushes every line (`clwb`); the caller fences.
    pub(crate) fn flush<M: Memory + ?Sized>(&self, mem: &mut M) -> Result<(), SpineError> {
        // The last line of a space whose size is not a multiple of LINE is partial.
        let size = mem.size();
        let flush_run = |mem: &mut M, first: u64, last: u64| {
            let start = first * LINE;
            let end = ((last + 1) * LINE).min(size);
            mem.flush(start, end - start, FlushKind::Clwb)
        };
        let mut run: Option<(u64, u64)> = None;
        for &l in &self.lines {
            run = match run {
                Some((first, last)) if last + 1 == l => Some((first, l)),
                Some((first, last)) => {
                    flush_run(mem, first, last)?;
                    Some((l, l))
                }
                None => Some((l, l)),
            };
        }
        if let Some((first, last)) = run {
            flush_run(mem, first, last)?;
        }
        Ok(())
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
