//! Which lease to ask for: a whole directory while no one else works in it, one
//! bucket of it once someone does.
//!
//! The paper's leases are hierarchical so that "if there are no conflicting accesses, a
//! coarse grained lock high in the file system tree suffices" (§5.1), and KVFS puts a
//! lock under the table's lock for each page of its hash table (§5.2). It leaves open
//! when a client should ask for the coarse lease and when for a fine one. Always
//! coarse, fifty clients creating files in one tree take the directory's lease from
//! one another on every operation (each revocation ships a batch and waits for the
//! service); always fine, a single client pays a lease request for every name it
//! looks up. We choose what lock managers with lock escalation do, driven by the one
//! signals a client has of contention. What an operation needs is the name's bucket
//! (exclusive, to change an entry) or the bucket's names (shared, to look one up: a
//! lease that does not cover the objects named, see [`crate::lease::names_key`]). The
//! client first asks for the whole directory instead, as a try
//! ([`crate::proto::Request::TryAcquire`]) that the service grants only if no other
//! client holds or waits for anything it conflicts with: asking wide never takes a
//! lease from anyone, so a client that starts while others work in a tree does not
//! stall them all. It stops trying for [`CONTENDED_FOR`] once a try was refused or a
//! lease it held on or below the directory was revoked. A directory nobody else uses
//! thus costs one lease, as before; a contended one costs a lease per bucket touched,
//! and revocations then concern only the buckets two clients really share.

use rustc_hash::FxHashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::lease::object_of_key;

/// How long a directory counts as contended after a lease on it (or on a bucket of
/// it) was revoked: long against an operation (microseconds), short against a
/// workload's phases, so a directory others stopped using is taken whole again.
pub const CONTENDED_FOR: Duration = Duration::from_secs(1);

/// Directories on which a lease of this client was revoked, and when.
#[derive(Default)]
pub(crate) struct Contention {
    since: Mutex<FxHashMap<u64, Instant>>,
}

impl Contention {
    /// Notes that the lease on `key` was taken back now, or (for a directory) that the
    /// service could not grant it without taking something from someone.
    pub fn revoked(&self, key: u64) {
        let mut m = self.since.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(object_of_key(key), Instant::now());
    }

    /// Whether directory `dir` counts as contended.
    pub fn contended(&self, dir: u64) -> bool {
        let mut m = self.since.lock().unwrap_or_else(|e| e.into_inner());
        match m.get(&dir) {
            Some(t) if t.elapsed() < CONTENDED_FOR => true,
            Some(_) => {
                m.remove(&dir);
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revocation_marks_the_directory_for_a_while() {
        let c = Contention::default();
        assert!(!c.contended(5));
        c.revoked(crate::lease::names_key(5, 3));
        assert!(c.contended(5));
        // Other directories stay whole.
        assert!(!c.contended(6));
        c.revoked(6);
        assert!(c.contended(6));
        c.since
            .lock()
            .unwrap()
            .insert(5, Instant::now() - CONTENDED_FOR);
        assert!(!c.contended(5));
    }
}
