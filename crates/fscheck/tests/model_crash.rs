//! The service's journal and commit path crash-tested on the machine model: every
//! crash point of seeded batches must recover to an fsck-clean volume holding exactly
//! the acknowledged batches (and perhaps the one in flight, whole); each broken commit
//! protocol must be caught.

use pmlab_fs::redo::{FAULTS, FaultPlan};
use pmlab_fscheck::crashtest::{self, Config};

#[test]
fn every_crash_point_recovers_to_a_whole_prefix_of_the_batches() {
    let mut kinds = [0; pmlab_fscheck::crashtest::workload::OP_NAMES.len()];
    // A cache holding a whole commit, and one of eight lines that evicts constantly.
    for (seed, cache_lines) in [(1, 1024), (2, 8)] {
        let cfg = Config {
            cache_lines,
            // Commits log and write only the lines they change, so a batch has few
            // persist points: forty batches reach every kind of operation.
            batches: 40,
            ..Config::small(seed)
        };
        let report = crashtest::run(&cfg).unwrap();
        eprintln!("seed {seed}, {cache_lines}-line cache:\n{report}");
        assert!(report.passed(), "seed {seed}: {report}");
        assert_eq!(report.batches, cfg.batches);
        // The exploration must reach both outcomes of a crash mid-commit.
        assert!(
            report.recovered_before > 0 && report.recovered_after > 0,
            "{report}"
        );
        assert!(report.points > 500, "{report}");
        for (k, n) in kinds.iter_mut().zip(report.ops_by_kind) {
            *k += n;
        }
    }
    // Every kind of operation was committed, and crashed, at least once.
    assert!(kinds.iter().all(|n| *n > 0), "{kinds:?}");
}

/// A run of `batches` batches under `faults`.
fn under(faults: FaultPlan, batches: usize) -> crashtest::Report {
    let cfg = Config {
        faults,
        batches,
        ..Config::small(1)
    };
    crashtest::run(&cfg).unwrap()
}

/// Each of pmlab-tx's redo faults must be caught by the file system's explorer too.
/// Six batches: `skip-apply-fence` needs a later batch whose log overwrites the one
/// still vouching for the unfenced pages, `header-only-checksum` a log whose body lines
/// still hold an older transaction's bytes.
#[test]
fn broken_commit_protocols_are_caught() {
    for fault in FAULTS {
        let report = under(FaultPlan::broken(fault), 6);
        eprintln!("{}:\n{report}", fault.name());
        assert!(!report.passed(), "{} not caught: {report}", fault.name());
    }
}

#[test]
fn a_batch_commit_costs_two_fences() {
    let report = under(FaultPlan::CORRECT, 4);
    assert!(report.passed(), "{report}");
    assert_eq!(report.commit_fences, 2 * report.batches as u64, "{report}");
    // At least one log line and one in-place line per page committed (its trailer
    // changes with any change), and far fewer than the 2 x 64 lines of logging and
    // writing back whole pages: a batch changes a few lines of each page it touches.
    let pages = report.pages_committed as u64;
    assert!(report.commit_flushes >= 2 * pages, "{report}");
    assert!(report.commit_flushes < 2 * 64 * pages / 4, "{report}");
}

/// A longer run for manual use:
/// `cargo test -p pmlab-fs --test model_crash -- --ignored --nocapture`.
#[test]
#[ignore]
fn large_run() {
    for (seed, cache_lines) in [(7, 1024), (8, 8)] {
        let cfg = Config {
            cache_lines,
            ..Config::large(seed)
        };
        let report = crashtest::run(&cfg).unwrap();
        eprintln!("large, seed {seed}, {cache_lines}-line cache:\n{report}");
        assert!(report.passed(), "{report}");
    }
}

/// How many crash images each broken protocol fails on the CI-sized run, without
/// stopping at the first few: `cargo test -p pmlab-fs --test model_crash -- --ignored
/// fault_census --nocapture`.
#[test]
#[ignore]
fn fault_census() {
    for faults in FAULTS.map(FaultPlan::broken) {
        let cfg = Config {
            faults,
            max_failures: usize::MAX,
            ..Config::small(1)
        };
        let report = crashtest::run(&cfg).unwrap();
        let batches: std::collections::BTreeSet<usize> =
            report.failures.iter().map(|f| f.batch).collect();
        eprintln!(
            "{faults}: {} failing images in {} of {} batches ({} images, {} distinct)",
            report.failures.len(),
            batches.len(),
            report.batches,
            report.images + report.recovery_images,
            report.distinct_images
        );
    }
}
