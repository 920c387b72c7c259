//! What one client, and one user, may hold at once: the paper's "lock hoarding" (§4,
//! "a malicious application locks too many files ... and does not relinquish such
//! locks") and plain quotas on what reservations take from everyone else.
//!
//! A grant is cut to what the limits leave (a reservation grants as many as it can, at
//! least one, or is refused), and everything a client holds is given back when it
//! disconnects, so a hostile client can deny others at most its share for as long as
//! it stays connected.

use crate::layout::Superblock;

/// Bounds on what a client (and the clients of one user together) may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Inodes reserved to one client and not yet used.
    pub inodes: u64,
    /// Inodes reserved to the clients of one user together.
    pub inodes_per_user: u64,
    /// Data pages reserved to one client and not yet used, over all domains.
    pub pages: u64,
    /// Data pages reserved to the clients of one user together, per domain.
    pub pages_per_user: u64,
    /// Leases one client holds at once.
    pub leases: usize,
    /// Objects one client has registered as open (pins against reclaim).
    pub opens: usize,
    /// Domains without objects whose owner is one user (new ones are refused beyond it).
    pub empty_domains: usize,
}

impl Limits {
    /// Limits scaled to a volume: a client may reserve an eighth of the inodes and of
    /// a domain's pages, the clients of one user three quarters (one user's many
    /// clients, a benchmark's threads say, still leave a quarter to everyone else);
    /// 65,536 leases and open files per client (a libFS client at the paper's
    /// 10,000-file sizes holds about a thousand leases); a quarter of the domain table
    /// may be empty domains of one user.
    pub fn for_volume(sb: &Superblock) -> Limits {
        Limits {
            inodes: (sb.inode_count / 8).max(32),
            inodes_per_user: (sb.inode_count / 4 * 3).max(64),
            pages: (sb.domain_pages / 8).max(64),
            pages_per_user: (sb.domain_pages / 4 * 3).max(128),
            leases: 65_536,
            opens: 65_536,
            empty_domains: (sb.max_domains as usize / 4).max(1),
        }
    }
}
