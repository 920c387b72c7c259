//! Crash points and deliberately broken variants, for the kill tests.
//!
//! Every step that stores into the structure (a record, a chunk of an order, a
//! publish) passes a crash point. With `PMLAB_SAM_KILL_AT=k` in the environment the
//! process kills itself with SIGKILL at its k-th point, so a test can stop a load or
//! an operation at any store it makes and check what the next process finds; with
//! `PMLAB_SAM_CRASH_POINTS=report` it prints how many points it passed
//! (`pmlab-sam-crash-points N` on stderr), so the test knows the range to explore.
//!
//! `PMLAB_SAM_BROKEN=NAME` selects a deliberately broken variant of one protocol or
//! operation ([`Broken`]); the tests show that each is caught. Neither variable is
//! meant for anything but tests; without them nothing changes.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// A deliberately broken variant (tests only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// Results are published (the root pointer stored) before their contents are
    /// written: the ordering the publish protocol exists for. Caught by the kill test.
    PublishFirst,
    /// Coordinate sort that is not stable (equal keys in any order). Caught by the
    /// comparison with `samtools sort`.
    UnstableSort,
    /// Name sort comparing plain bytes instead of samtools' `strnum_cmp`. Caught by
    /// the comparison with `samtools sort -n`.
    NameBytes,
    /// The index points each window one record late. Caught by the comparison with
    /// `samtools view`.
    IndexLate,
    /// `view` stops one base early (off by one at the region's end). Caught by the
    /// comparison with `samtools view`.
    ViewEndEarly,
    /// A load into a VAS builds its objects without the name's creation lock, so a
    /// second load of the same name at once takes the first one's half-made objects
    /// for those of a load that died and replaces them. Caught by the concurrent-load
    /// test.
    CreateUnlocked,
    /// A load into a region file renames it into place over whatever is there, so of
    /// two loads of one name at once both succeed and the later replaces the other's.
    /// Caught by the concurrent-load test.
    RenameOver,
}

impl Broken {
    /// Every variant with its name.
    pub const ALL: [(Broken, &'static str); 7] = [
        (Broken::PublishFirst, "publish-first"),
        (Broken::UnstableSort, "unstable-sort"),
        (Broken::NameBytes, "name-bytes"),
        (Broken::IndexLate, "index-late"),
        (Broken::ViewEndEarly, "view-end-early"),
        (Broken::CreateUnlocked, "create-unlocked"),
        (Broken::RenameOver, "rename-over"),
    ];
}

fn broken_now() -> Option<Broken> {
    static B: OnceLock<Option<Broken>> = OnceLock::new();
    *B.get_or_init(|| {
        let v = std::env::var("PMLAB_SAM_BROKEN").ok()?;
        Broken::ALL.iter().find(|(_, n)| *n == v).map(|(b, _)| *b)
    })
}

/// Whether broken variant `b` is selected.
#[inline]
pub fn broken(b: Broken) -> bool {
    broken_now() == Some(b)
}

/// Points left before the kill (0: never), and points passed.
static LEFT: AtomicU64 = AtomicU64::new(0);
static PASSED: AtomicU64 = AtomicU64::new(0);

/// Reads `PMLAB_SAM_KILL_AT` (a command calls this once, first).
pub fn arm_from_env() {
    if let Some(k) = std::env::var("PMLAB_SAM_KILL_AT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        arm_kill_at(k);
    }
}

/// Makes this process SIGKILL itself at its `k`-th crash point from now (0: never).
pub fn arm_kill_at(k: u64) {
    LEFT.store(k, Ordering::Relaxed);
}

/// A crash point: a store to the structure is about to happen (or just happened).
#[inline]
pub fn point() {
    PASSED.fetch_add(1, Ordering::Relaxed);
    let left = LEFT.load(Ordering::Relaxed);
    if left == 0 {
        return;
    }
    if left == 1 {
        // SAFETY: raising a signal has no memory-safety preconditions.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    LEFT.store(left - 1, Ordering::Relaxed);
}

/// Holds a load open where a second load of the same name could meet it: with
/// `PMLAB_SAM_PAUSE_MS=N` (tests only) the process sleeps N ms after a VAS load made
/// its first object and before it made the rest, or before a region file is put in
/// place. Without the variable nothing happens.
pub fn pause_point() {
    if let Some(ms) = std::env::var("PMLAB_SAM_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// Crash points passed so far.
pub fn passed() -> u64 {
    PASSED.load(Ordering::Relaxed)
}

/// Prints the number of points passed if `PMLAB_SAM_CRASH_POINTS=report`.
pub fn report_if_asked() {
    if std::env::var("PMLAB_SAM_CRASH_POINTS").is_ok_and(|v| v == "report") {
        eprintln!("pmlab-sam-crash-points {}", passed());
    }
}
