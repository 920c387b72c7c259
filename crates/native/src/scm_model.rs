//! The SCM write model: DRAM made to write like phase-change memory.
//!
//! Aerie's evaluation (paper 004, §6, "Methodology") emulates SCM on DRAM by "introducing
//! a 150ns delay after each write and limiting write bandwidth to 4GB/s". That emulator
//! (the one of the same group's Mnemosyne) charges the delay where a cache line is written
//! back to the memory, i.e. after each `clflush`, and busy-waits rather than sleeps: a
//! sleep cannot wait 150 ns. pmlab does the same for every cache line it writes back
//! itself (every line a [`crate::Region`] flushes, in every persist mode), while the
//! model is on. It is a process-wide setting, off by default.
//!
//! How the two limits combine (the paper leaves it open; this is the emulator's reading):
//! - **Latency** is per line and serial for the issuing thread: a write-back of `n`
//!   lines stalls the thread `n × 150 ns`, counted from when its flush instructions have
//!   executed (the delay comes *after* the write, on top of the instructions' own cost).
//! - **Bandwidth** is shared by all threads of the process: a virtual clock (a token
//!   bucket that holds no burst) hands out the memory's write time, `64 B / 4 GB/s =
//!   16 ns` per line, first come first served. A write-back of `n` lines reserves `n`
//!   consecutive slots no earlier than now and may not complete before the last one ends.
//! - The thread waits until both are satisfied, i.e. until the later of the two
//!   deadlines. One thread alone is bound by latency (64 B per 150 ns ≈ 0.43 GB/s);
//!   the bandwidth cap binds once about ten threads write back at once.
//!
//! Waiting spins on [`std::time::Instant`] towards an absolute deadline, so the cost of
//! reading the clock is absorbed in the wait instead of adding to it (calibration by
//! construction: the wait ends at the deadline however slow the clock read is, to within
//! one read). Every charge is counted per thread and per process ([`thread_charges`],
//! [`process_charges`]), which is what the tests check: timing is never asserted.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use pmlab_spine::LINE;

/// The write costs the model adds to every written-back cache line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteModel {
    /// Delay after each written-back line, in nanoseconds (0: none).
    pub write_delay_ns: u32,
    /// Write bandwidth of the memory in MB/s (10^6 bytes per second; 0: unlimited).
    pub bandwidth_mb_per_s: u32,
}

impl WriteModel {
    /// No added cost: DRAM as it is. The default.
    pub const OFF: WriteModel = WriteModel {
        write_delay_ns: 0,
        bandwidth_mb_per_s: 0,
    };

    /// Aerie's PCM (paper 004, §6): 150 ns after each write, 4 GB/s.
    pub const AERIE_PCM: WriteModel = WriteModel {
        write_delay_ns: 150,
        bandwidth_mb_per_s: 4000,
    };

    /// Whether the model adds nothing.
    pub fn is_off(self) -> bool {
        self.write_delay_ns == 0 && self.bandwidth_mb_per_s == 0
    }

    /// Picoseconds one cache line occupies the memory's write bandwidth (0: unlimited).
    pub fn line_transfer_ps(self) -> u64 {
        match self.bandwidth_mb_per_s {
            0 => 0,
            // LINE bytes / (mb × 10^6 B/s) in ps = LINE × 10^6 / mb.
            mb => LINE * 1_000_000 / u64::from(mb),
        }
    }

    fn pack(self) -> u64 {
        (u64::from(self.write_delay_ns) << 32) | u64::from(self.bandwidth_mb_per_s)
    }

    fn unpack(v: u64) -> WriteModel {
        WriteModel {
            write_delay_ns: (v >> 32) as u32,
            bandwidth_mb_per_s: v as u32,
        }
    }
}

/// The environment variable through which a process hands its write model to the
/// processes it starts (the file-system service and clients of `pmlab fs stress`).
pub const WRITE_MODEL_ENV: &str = "PMLAB_SCM_WRITE_MODEL";

impl std::str::FromStr for WriteModel {
    type Err = String;

    /// `off`, `pcm` (Aerie's [`WriteModel::AERIE_PCM`]) or `<delay>ns,<bandwidth>MB/s`,
    /// for example `150ns,4000MB/s`.
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "off" => return Ok(WriteModel::OFF),
            "pcm" => return Ok(WriteModel::AERIE_PCM),
            _ => {}
        }
        let bad = || format!("write model {text:?}: expected off, pcm or <ns>ns,<MB/s>MB/s");
        let (delay, bw) = text.split_once(',').ok_or_else(bad)?;
        Ok(WriteModel {
            write_delay_ns: delay
                .strip_suffix("ns")
                .and_then(|d| d.parse().ok())
                .ok_or_else(bad)?,
            bandwidth_mb_per_s: bw
                .strip_suffix("MB/s")
                .and_then(|b| b.parse().ok())
                .ok_or_else(bad)?,
        })
    }
}

impl std::fmt::Display for WriteModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_off() {
            return f.write_str("off");
        }
        write!(
            f,
            "{}ns,{}MB/s",
            self.write_delay_ns, self.bandwidth_mb_per_s
        )
    }
}

/// Sets the write model named by [`WRITE_MODEL_ENV`], if that variable is set; returns
/// the model in force afterwards.
pub fn set_write_model_from_env() -> Result<WriteModel, String> {
    if let Some(v) = std::env::var_os(WRITE_MODEL_ENV) {
        let text = v
            .into_string()
            .map_err(|_| format!("{WRITE_MODEL_ENV} is not UTF-8"))?;
        set_write_model(text.parse()?);
    }
    Ok(write_model())
}

impl Default for WriteModel {
    fn default() -> Self {
        WriteModel::OFF
    }
}

/// Both fields in one word, so that a persist racing with [`set_write_model`] sees
/// either the old model or the new one, never half of each.
static MODEL: AtomicU64 = AtomicU64::new(0);
/// The bandwidth virtual clock: picoseconds since [`epoch`] at which the memory's write
/// path next falls idle.
static BANDWIDTH_FREE_PS: AtomicU64 = AtomicU64::new(0);
static PROCESS_LINES: AtomicU64 = AtomicU64::new(0);
static PROCESS_STALL_PS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD_LINES: Cell<u64> = const { Cell::new(0) };
    static THREAD_STALL_PS: Cell<u64> = const { Cell::new(0) };
}

/// Turns the write model on (or, with [`WriteModel::OFF`], off) for the whole process.
pub fn set_write_model(model: WriteModel) {
    MODEL.store(model.pack(), Ordering::Relaxed);
}

/// The write model in force.
pub fn write_model() -> WriteModel {
    WriteModel::unpack(MODEL.load(Ordering::Relaxed))
}

/// Lines charged and modelled stall, for one thread or the whole process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Charges {
    /// Written-back cache lines charged while the model was on.
    pub lines: u64,
    /// Total modelled stall in picoseconds: for each write-back, from the end of its
    /// flush instructions to its deadline (the later of latency and bandwidth).
    pub stall_ps: u64,
}

/// What the calling thread has been charged since it started.
pub fn thread_charges() -> Charges {
    Charges {
        lines: THREAD_LINES.with(Cell::get),
        stall_ps: THREAD_STALL_PS.with(Cell::get),
    }
}

/// What all threads of the process have been charged.
pub fn process_charges() -> Charges {
    Charges {
        lines: PROCESS_LINES.load(Ordering::Relaxed),
        stall_ps: PROCESS_STALL_PS.load(Ordering::Relaxed),
    }
}

/// One write-back's schedule under a model, as a pure function of the clock so that it
/// can be tested without timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// When the issuing thread may continue (ps since the epoch).
    pub deadline_ps: u64,
    /// The bandwidth clock after this write-back.
    pub bandwidth_free_ps: u64,
}

/// Schedules `lines` written back at `now_ps` when the write path is busy until
/// `bandwidth_free_ps`.
pub(crate) fn schedule(
    model: WriteModel,
    now_ps: u64,
    bandwidth_free_ps: u64,
    lines: u64,
) -> Schedule {
    let latency_end = now_ps + lines * u64::from(model.write_delay_ns) * 1000;
    let transfer = lines * model.line_transfer_ps();
    let (bandwidth_end, bandwidth_free_ps) = if transfer == 0 {
        (now_ps, bandwidth_free_ps)
    } else {
        let end = bandwidth_free_ps.max(now_ps) + transfer;
        (end, end)
    };
    Schedule {
        deadline_ps: latency_end.max(bandwidth_end),
        bandwidth_free_ps,
    }
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ps() -> u64 {
    epoch().elapsed().as_nanos() as u64 * 1000
}

/// Charges `lines` cache lines the calling thread has just written back: counts them
/// and busy-waits until the model's deadline. Does nothing while the model is off.
pub(crate) fn charge_lines(lines: u64) {
    let model = write_model();
    if model.is_off() || lines == 0 {
        return;
    }
    let start = now_ps();
    let mut free = BANDWIDTH_FREE_PS.load(Ordering::Relaxed);
    let plan = loop {
        let plan = schedule(model, start, free, lines);
        if plan.bandwidth_free_ps == free {
            break plan;
        }
        match BANDWIDTH_FREE_PS.compare_exchange_weak(
            free,
            plan.bandwidth_free_ps,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => break plan,
            Err(seen) => free = seen,
        }
    };
    let stall = plan.deadline_ps - start;
    THREAD_LINES.with(|c| c.set(c.get() + lines));
    THREAD_STALL_PS.with(|c| c.set(c.get() + stall));
    PROCESS_LINES.fetch_add(lines, Ordering::Relaxed);
    PROCESS_STALL_PS.fetch_add(stall, Ordering::Relaxed);
    while now_ps() < plan.deadline_ps {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aerie_pcm_line_costs() {
        let m = WriteModel::AERIE_PCM;
        assert!(!m.is_off());
        assert!(WriteModel::OFF.is_off());
        assert_eq!(WriteModel::default(), WriteModel::OFF);
        // 64 B at 4 GB/s.
        assert_eq!(m.line_transfer_ps(), 16_000);
        assert_eq!(WriteModel::unpack(m.pack()), m);
    }

    #[test]
    fn models_parse_and_print() {
        for m in [WriteModel::OFF, WriteModel::AERIE_PCM] {
            assert_eq!(m.to_string().parse::<WriteModel>(), Ok(m));
        }
        assert_eq!("pcm".parse(), Ok(WriteModel::AERIE_PCM));
        assert_eq!(WriteModel::AERIE_PCM.to_string(), "150ns,4000MB/s");
        assert!("150,4000".parse::<WriteModel>().is_err());
    }

    #[test]
    fn one_thread_is_bound_by_latency() {
        let m = WriteModel::AERIE_PCM;
        let s = schedule(m, 1_000_000, 0, 4);
        assert_eq!(s.deadline_ps, 1_000_000 + 4 * 150_000);
        assert_eq!(s.bandwidth_free_ps, 1_000_000 + 4 * 16_000);
    }

    #[test]
    fn a_busy_write_path_delays_until_its_slots_end() {
        let m = WriteModel::AERIE_PCM;
        // Other threads hold the write path for 10 µs: one line waits for it, then 16 ns.
        let s = schedule(m, 0, 10_000_000, 1);
        assert_eq!(s.deadline_ps, 10_016_000);
        assert_eq!(s.bandwidth_free_ps, 10_016_000);
        // Bandwidth only: the slots alone decide.
        let bw_only = WriteModel {
            write_delay_ns: 0,
            ..m
        };
        assert_eq!(schedule(bw_only, 500, 0, 2).deadline_ps, 500 + 32_000);
        // Latency only: the bandwidth clock is left alone.
        let lat_only = WriteModel {
            bandwidth_mb_per_s: 0,
            ..m
        };
        let s = schedule(lat_only, 0, 77, 3);
        assert_eq!((s.deadline_ps, s.bandwidth_free_ps), (450_000, 77));
    }

    #[test]
    fn charges_are_counted_only_while_on() {
        // Counters are per thread, so tests running in parallel cannot disturb this one;
        // the model itself is process-wide, hence one test sets it and restores OFF.
        let before = thread_charges();
        charge_lines(5);
        assert_eq!(thread_charges(), before, "the model is off by default");
        let mut region = crate::Region::create_memfd("scm-model", 1 << 16).unwrap();
        set_write_model(WriteModel::AERIE_PCM);
        assert_eq!(write_model(), WriteModel::AERIE_PCM);
        charge_lines(5);
        let mid = thread_charges();
        // Bytes 5..205 span lines 0..=3: four write-backs, whatever the persist mode.
        pmlab_spine::Memory::persist(&mut region, 5, 200).unwrap();
        set_write_model(WriteModel::OFF);
        let after = thread_charges();
        assert_eq!(mid.lines - before.lines, 5);
        assert_eq!(after.lines - mid.lines, 4);
        assert!(mid.stall_ps - before.stall_ps >= 5 * 150_000);
        assert!(after.stall_ps - mid.stall_ps >= 4 * 150_000);
        assert!(process_charges().lines >= 9);
        pmlab_spine::Memory::persist(&mut region, 0, 64).unwrap();
        assert_eq!(thread_charges(), after, "off again");
    }
}
