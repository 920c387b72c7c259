//! `fsck` for the registry: every VAS file parses and names existing segments, every
//! segment's header and lock file are sound, segments overlap only their own clones,
//! and no lock is held by a dead process (cleared with `repair`).

use super::lock::SegLock;
use super::registry::Registry;
use crate::error::VasError;

/// What a check found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CheckReport {
    /// VASes checked.
    pub vases: usize,
    /// Segments checked.
    pub segments: usize,
    /// Inconsistencies, each naming its object.
    pub problems: Vec<String>,
    /// Holds of dead processes found (and cleared, with `repair`): (segment, pid).
    pub dead_holders: Vec<(String, u32)>,
}

impl CheckReport {
    /// No problem and no dead holder left.
    pub fn clean(&self, repaired: bool) -> bool {
        self.problems.is_empty() && (repaired || self.dead_holders.is_empty())
    }
}

/// Checks the registry; with `repair`, clears dead holders' locks.
pub fn check(reg: &Registry, repair: bool) -> Result<CheckReport, VasError> {
    let mut r = CheckReport::default();
    let mut headers = Vec::new();
    for name in reg.seg_names()? {
        r.segments += 1;
        match reg.read_seg(&name) {
            Ok((h, _, _)) => headers.push(h),
            Err(e) => {
                r.problems.push(e.to_string());
                continue;
            }
        }
        match SegLock::open(&reg.lock_path(&name)) {
            Err(e) => r.problems.push(format!("segment {name}: {e}")),
            Ok(lock) => {
                let st = lock.state();
                let dead = st
                    .writer
                    .into_iter()
                    .chain(st.readers.iter().map(|(h, _)| *h))
                    .filter(|h| !h.alive());
                for h in dead {
                    r.dead_holders.push((name.clone(), h.pid));
                }
                if repair {
                    lock.recover()?;
                }
            }
        }
    }
    for (i, a) in headers.iter().enumerate() {
        for b in &headers[i + 1..] {
            let family = a.id == b.clone_of
                || b.id == a.clone_of
                || (a.clone_of != 0 && a.clone_of == b.clone_of);
            if !family && a.base < b.base + b.size && b.base < a.base + a.size {
                r.problems
                    .push(format!("segments {} and {} overlap", a.name, b.name));
            }
            if a.id == b.id {
                r.problems.push(format!(
                    "segments {} and {} share id {}",
                    a.name, b.name, a.id
                ));
            }
        }
    }
    for name in reg.vas_names()? {
        r.vases += 1;
        match reg.read_vas(&name) {
            Err(e) => r.problems.push(e.to_string()),
            Ok((v, _)) => {
                for e in &v.segments {
                    if !headers.iter().any(|h| h.name == e.segment) {
                        r.problems.push(format!(
                            "VAS {name} lists segment {}, which does not exist or is unreadable",
                            e.segment
                        ));
                    }
                }
            }
        }
    }
    Ok(r)
}
