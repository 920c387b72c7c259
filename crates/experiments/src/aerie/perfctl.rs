//! Profiling only the timed phase of a FileBench run.
//!
//! Building a fileset and populating a volume's data space take most of a run's CPU
//! time, so a profile of a whole run says little about the file systems. `perf record
//! --control` takes commands on a FIFO; with `PMLAB_PERF_CTL` naming that FIFO, a run
//! writes `enable` when its first thread leaves the start barrier and `disable` when its
//! last thread is done, so that only the timed phases are sampled:
//!
//! ```sh
//! mkfifo /tmp/perf.ctl
//! PMLAB_PERF_CTL=/tmp/perf.ctl perf record -D -1 --control fifo:/tmp/perf.ctl -g -- \
//!     pmlab reproduce aerie --only varmail --threads 16 --no-table2
//! ```

use std::io::Write;

/// The variable naming perf's control FIFO.
pub const PERF_CTL_ENV: &str = "PMLAB_PERF_CTL";

/// Sends `command` (`enable` or `disable`) to perf's control FIFO, if one is named;
/// a FIFO that cannot be written is ignored (the run is not profiled).
fn send(command: &str) {
    if let Some(path) = std::env::var_os(PERF_CTL_ENV)
        && let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(path)
    {
        let _ = writeln!(f, "{command}");
    }
}

/// The timed phase begins: sampling on.
pub fn timed_phase_begins() {
    send("enable");
}

/// The timed phase is over: sampling off.
pub fn timed_phase_ends() {
    send("disable");
}
