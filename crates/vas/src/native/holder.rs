//! Who holds a lock: a process id with the process's start time, so that a recycled
//! process id is not mistaken for the holder that died.
//!
//! The start time is kept modulo 2^32 clock ticks, so that pid and start pack into one
//! 64-bit word that a lock's writer takes with a single compare-and-swap (see
//! `lock.rs`). A recycled pid is then mistaken for the dead holder only if it started a
//! multiple of 2^32 ticks later (497 days at the usual 100 ticks per second).

/// The bits of a start time a [`Holder`] keeps.
pub const START_MASK: u64 = 0xffff_ffff;

/// A process as lock slots record it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks after boot (`/proc/PID/stat` field 22), modulo 2^32.
    pub start: u64,
}

/// What `/proc/PID/stat` says about a process: its state letter and start time.
fn stat_of(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: fields after
    // the last ')' are plain.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 is the state; the start time is field 22, i.e. 19 further on.
    let start: u64 = fields.nth(18)?.parse().ok()?;
    Some((state, start & START_MASK))
}

impl Holder {
    /// This process.
    pub fn me() -> Holder {
        let pid = std::process::id();
        let start = stat_of(pid).map_or(0, |(_, s)| s);
        Holder { pid, start }
    }

    /// Whether process `pid` runs (exists and is not a zombie), whatever its start.
    pub fn alive_ignoring_start(&self) -> bool {
        stat_of(self.pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
    }

    /// The holder as one word: pid in the low half, start in the high half (never 0:
    /// no process has pid 0).
    pub fn packed(&self) -> u64 {
        u64::from(self.pid) | ((self.start & START_MASK) << 32)
    }

    /// The holder a word from [`Holder::packed`] names; `None` for 0 (nobody).
    pub fn unpacked(w: u64) -> Option<Holder> {
        (w as u32 != 0).then_some(Holder {
            pid: w as u32,
            start: w >> 32,
        })
    }

    /// Whether the process still runs: it exists, is not a zombie (killed but not yet
    /// reaped), and started when the slot says (its pid was not reused).
    pub fn alive(&self) -> bool {
        // SAFETY: signal 0 only checks for existence and permission.
        let r = unsafe { libc::kill(self.pid as libc::pid_t, 0) };
        if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
            return false;
        }
        match stat_of(self.pid) {
            Some((state, start)) => state != 'Z' && state != 'X' && start == self.start,
            None => false,
        }
    }
}
