//! One pass, several lower hierarchies: the level-1 caches are simulated once and the
//! traffic they send below is replayed into each alternative lower hierarchy.
//!
//! Exact because in Dinero IV's model a lower level never acts on an upper one (no
//! inclusion, no back-invalidation): what level 1 sends below depends on the trace alone.

use crate::config::{ConfigError, HierarchyConfig};
use crate::hierarchy::{Hierarchy, MemoryLog};
use crate::stats::NamedStats;

/// Upper levels simulated once, feeding N alternative lower hierarchies. Counters are
/// identical to N separate runs of the concatenated hierarchies with the same seed.
pub struct MultiL2 {
    front: Hierarchy,
    backs: Vec<Hierarchy>,
}

impl MultiL2 {
    /// `upper`: the shared upper levels (typically the split level-1 caches); `lowers`:
    /// the alternatives for the levels below. Each `upper + lower` must be a valid
    /// hierarchy.
    pub fn new(
        upper: &HierarchyConfig,
        lowers: &[HierarchyConfig],
        seed: u64,
    ) -> Result<MultiL2, ConfigError> {
        upper.validate()?;
        for lower in lowers {
            let mut whole = upper.clone();
            whole.levels.extend(lower.levels.iter().copied());
            whole.validate()?;
        }
        let mut front = Hierarchy::build(upper, seed, 0);
        front.log = MemoryLog::All;
        let n = upper.levels.len();
        let backs = lowers
            .iter()
            .map(|l| Hierarchy::build(l, seed, n))
            .collect();
        Ok(MultiL2 { front, backs })
    }

    fn feed(&mut self) {
        for b in &mut self.backs {
            for &(kind, addr, size) in &self.front.memory_ops {
                b.access(kind, addr, size);
            }
        }
        self.front.memory_ops.clear();
    }

    /// Simulates a batch of references.
    pub fn run(&mut self, refs: &[pmlab_trace::Ref]) {
        self.front.run(refs);
        self.feed();
    }

    /// Dinero IV's end-of-run copy-back (see [`Hierarchy::finish`]).
    pub fn finish(&mut self) {
        self.front.finish();
        self.feed();
        for b in &mut self.backs {
            b.finish();
        }
    }

    /// Number of alternative lower hierarchies.
    pub fn alternatives(&self) -> usize {
        self.backs.len()
    }

    /// The counters of the upper caches followed by those of alternative `i`, as
    /// [`Hierarchy::stats`] of the concatenated hierarchy would report them.
    pub fn stats(&self, i: usize) -> Vec<NamedStats> {
        let mut s = self.front.stats();
        s.extend(self.backs[i].stats());
        s
    }
}
