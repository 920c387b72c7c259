//! Page consolidation (paper 000 §2.2): when a page leaves the last-level TLB its
//! valid lines are merged into one frame — the one that already holds more of them,
//! so the fewer are copied — the page map is pointed at it, and the other frame is
//! freed once the consistent state table no longer names it.

use super::config::OspFault;
use super::engine::{Osp, Path, bits, clwb, copy_line};
use super::layout::LINES;
use super::state::State;
use crate::flushes::Source;
use pmlab_model::Machine;
use pmlab_spine::Memory;

impl Osp {
    /// Consolidates `vpn` (a page with two frames, out of the TLB and the queue).
    pub(crate) fn consolidate(&mut self, m: &mut Machine, vpn: u64, path: Path) {
        let s = self.st.pages.remove(&vpn).expect("a page with two frames");
        let before = self.st.flushes.total();
        self.st.stats.consolidations += 1;
        // Lines whose committed version is in P1; merge into the frame with more.
        let in_p1 = u64::from(s.committed.count_ones());
        let (target, source, lines) = if 2 * in_p1 > LINES {
            (s.p1, s.p0, !s.committed)
        } else {
            (s.p0, s.p1, s.committed)
        };
        let wrong = self.cfg.fault == Some(OspFault::CopyFromWrongPage);
        for i in bits(lines) {
            copy_line(m, if wrong { target } else { source }, target, i);
            clwb(m, State::line_addr(target, i));
        }
        let copied = u64::from(lines.count_ones());
        if copied > 0 {
            m.fence();
            self.st.flushes.add(Source::Consolidation, copied);
            self.st.stats.lines_copied += copied;
        } else {
            self.st.stats.free_consolidations += 1;
        }
        let old = self.st.pte_of(vpn);
        if target != old {
            self.st.write_pte(m, vpn, target);
        }
        // The durable state names the source frame only if a committed line is there.
        let named = s.committed != 0;
        let wait = !self.recovering
            && self.backend.consolidated(
                m,
                &mut self.st,
                vpn,
                named,
                target != old,
                self.cfg.fault,
            );
        if wait {
            self.st.frames.put_in_limbo(source);
        } else {
            self.st.frames.free(source);
        }
        let spent = self.st.flushes.total() - before;
        match path {
            Path::Miss => self.st.stats.miss_path_flushes += spent,
            Path::Background => self.st.stats.background_flushes += spent,
            Path::Recovery => {}
        }
    }
}
