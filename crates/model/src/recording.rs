//! Crash-point exploration.
//!
//! A run is recorded once ([`crate::Machine::record`]) as the sequence of durable-state
//! events (writes that reached memory, pending write-backs, fences) separated by
//! operation boundaries. Exploring replays the events onto one [`DurableState`] and, at
//! every selected boundary, hands the durable image to a checker: the cost is one pass
//! over the events plus the checker's own, with no image copied per crash point. At each
//! point the write-backs still pending can be left out (the deterministic crash), or
//! subsets of them applied (randomly or exhaustively).

use pmlab_spine::{Memory, VecMemory};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::persist::{DurableState, Event, PointKind};

/// Which operation boundaries are crash points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granularity {
    /// After every line-sized load and store, every line flush, every fence and every
    /// chaos write-back (the finest the model has).
    EveryOp,
    /// After every line flush and every fence (and at start and end).
    PersistOps,
    /// After every fence (and at start and end).
    Fences,
}

impl Granularity {
    fn selects(self, kind: PointKind) -> bool {
        match (self, kind) {
            (_, PointKind::Start | PointKind::End) => true,
            (Self::EveryOp, _) => true,
            (Self::PersistOps, k) => matches!(k, PointKind::Flush | PointKind::Fence),
            (Self::Fences, k) => k == PointKind::Fence,
        }
    }
}

/// What to do with the write-backs still pending at a crash point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingChoice {
    /// None of them reached memory (what [`crate::Machine::crash`] returns).
    None,
    /// The deterministic image, plus `samples` images where each pending write-back
    /// reached memory with probability 1/2 (xoshiro256++ seeded with `seed`).
    Random {
        /// Extra images per crash point that has pending write-backs.
        samples: u32,
        /// Seed of the generator.
        seed: u64,
    },
    /// Every subset, if at most `max_pending` are pending; otherwise the empty and the
    /// full subset only (and the report counts the point as truncated).
    Exhaustive {
        /// Largest number of pending write-backs to enumerate `2^n` subsets of.
        max_pending: u32,
    },
}

/// How to explore a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExploreOptions {
    /// Which boundaries are crash points.
    pub granularity: Granularity,
    /// Pending write-backs at each point.
    pub pending: PendingChoice,
    /// Skip a point whose durable state did not change since the previous checked
    /// point (its images would be the same).
    pub skip_unchanged: bool,
    /// Stop after this many failures.
    pub max_failures: usize,
    /// Check only every `stride`-th point that the other options select (1 checks
    /// them all; larger strides sample long runs evenly). The end is always checked.
    pub stride: usize,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        Self {
            granularity: Granularity::EveryOp,
            pending: PendingChoice::Exhaustive { max_pending: 8 },
            skip_unchanged: true,
            max_failures: 16,
            stride: 1,
        }
    }
}

/// One image a crash could leave, as the checker sees it.
#[derive(Debug)]
pub struct CrashImage<'a> {
    /// Index of the boundary in the recording (0 is the start), whatever the
    /// granularity; the same run always numbers its boundaries the same way.
    pub boundary: usize,
    /// What ended at this boundary.
    pub kind: PointKind,
    /// Pending write-backs at this point.
    pub pending: usize,
    /// Which of them (indices, oldest first) this image includes.
    pub applied: &'a [usize],
    /// The durable physical memory.
    pub bytes: &'a [u8],
}

impl CrashImage<'_> {
    /// The image as a plain memory, to run recovery code on through the spine.
    pub fn memory(&self) -> VecMemory {
        let mut m = VecMemory::new(self.bytes.len());
        m.write(0, self.bytes)
            .expect("an image fits a memory of its own size");
        m
    }
}

/// A crash image the checker rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashFailure {
    /// Boundary index (see [`CrashImage::boundary`]).
    pub boundary: usize,
    /// What ended at this boundary.
    pub kind: PointKind,
    /// The pending write-backs the image included.
    pub applied: Vec<usize>,
    /// The checker's message.
    pub message: String,
}

/// A recording that reached the machine's recording limit and stopped: its events do not
/// reach the end of the run, so no exploration of it can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "crash recording stopped at its limit of {limit} bytes after {events} events: record a shorter \
     run, or raise the limit with Machine::set_recording_limit"
)]
pub struct RecordingOverflow {
    /// The limit, in bytes of recorded events.
    pub limit: u64,
    /// Events recorded before it was reached.
    pub events: usize,
}

/// The outcome of an exploration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExploreReport {
    /// Set when the recording was incomplete and nothing was explored.
    pub incomplete: Option<RecordingOverflow>,
    /// Crash points considered (after granularity and skipping unchanged ones).
    pub points: usize,
    /// Images given to the checker.
    pub images: usize,
    /// Points with more pending write-backs than `max_pending` (not all subsets tried).
    pub truncated_points: usize,
    /// Rejected images, up to `max_failures`.
    pub failures: Vec<CrashFailure>,
}

impl ExploreReport {
    /// Whether the whole recording was explored and every image passed.
    pub fn passed(&self) -> bool {
        self.incomplete.is_none() && self.failures.is_empty()
    }
}

/// A recorded run: the durable state at its start and the events after.
#[derive(Clone, Debug)]
pub struct Recording {
    base: DurableState,
    events: Vec<Event>,
    overflow: Option<RecordingOverflow>,
}

impl Recording {
    pub(crate) fn new(
        base: DurableState,
        events: Vec<Event>,
        overflow: Option<RecordingOverflow>,
    ) -> Self {
        Self {
            base,
            events,
            overflow,
        }
    }

    /// Whether the recording stopped at the machine's limit before the run ended.
    pub fn overflow(&self) -> Option<RecordingOverflow> {
        self.overflow
    }

    /// The events, in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Number of boundaries (crash points at [`Granularity::EveryOp`]).
    pub fn boundaries(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Point(_)))
            .count()
    }

    /// The durable state at boundary `boundary` (pending write-backs listed, not
    /// applied); `None` past the end.
    pub fn state_at(&self, boundary: usize) -> Option<DurableState> {
        let mut state = self.base.clone();
        let mut seen = 0;
        for e in &self.events {
            if let Event::Point(_) = e {
                if seen == boundary {
                    return Some(state);
                }
                seen += 1;
            }
            state.apply(e);
        }
        None
    }

    /// Replays the run and gives `check` every crash image `opts` selects; `check`
    /// returns `Err(message)` to reject one.
    pub fn explore(
        &self,
        opts: &ExploreOptions,
        mut check: impl FnMut(&CrashImage<'_>) -> Result<(), String>,
    ) -> ExploreReport {
        let mut report = ExploreReport::default();
        if let Some(o) = self.overflow {
            report.incomplete = Some(o);
            return report;
        }
        let mut state = self.base.clone();
        let mut changed = true;
        let mut boundary = 0usize;
        let mut selected = 0usize;
        let mut rng = match opts.pending {
            PendingChoice::Random { seed, .. } => Some(Xoshiro256PlusPlus::seed_from_u64(seed)),
            _ => None,
        };
        for e in &self.events {
            let Event::Point(kind) = e else {
                state.apply(e);
                changed = true;
                continue;
            };
            let b = boundary;
            boundary += 1;
            if !opts.granularity.selects(*kind) || (opts.skip_unchanged && !changed) {
                continue;
            }
            selected += 1;
            if !(selected - 1).is_multiple_of(opts.stride.max(1)) && *kind != PointKind::End {
                continue;
            }
            changed = false;
            report.points += 1;
            for subset in subsets(&state, opts.pending, rng.as_mut(), &mut report) {
                let saved = state.apply_subset(&subset);
                let image = CrashImage {
                    boundary: b,
                    kind: *kind,
                    pending: state.pending().len(),
                    applied: &subset,
                    bytes: state.image(),
                };
                report.images += 1;
                let verdict = check(&image);
                state.undo(saved);
                if let Err(message) = verdict {
                    report.failures.push(CrashFailure {
                        boundary: b,
                        kind: *kind,
                        applied: subset,
                        message,
                    });
                    if report.failures.len() >= opts.max_failures {
                        return report;
                    }
                }
            }
        }
        report
    }
}

/// The subsets of pending write-backs to try at one point; the empty one first.
fn subsets(
    state: &DurableState,
    choice: PendingChoice,
    rng: Option<&mut Xoshiro256PlusPlus>,
    report: &mut ExploreReport,
) -> Vec<Vec<usize>> {
    let n = state.pending().len();
    let mut out = vec![Vec::new()];
    if n == 0 {
        return out;
    }
    match choice {
        PendingChoice::None => {}
        PendingChoice::Random { samples, .. } => {
            let rng = rng.expect("a random choice has a generator");
            for _ in 0..samples {
                out.push((0..n).filter(|_| rng.r#gen::<bool>()).collect());
            }
        }
        PendingChoice::Exhaustive { max_pending } => {
            if n <= max_pending as usize && n < 31 {
                for mask in 1u32..(1 << n) {
                    out.push((0..n).filter(|i| mask & (1 << i) != 0).collect());
                }
            } else {
                report.truncated_points += 1;
                out.push((0..n).collect());
            }
        }
    }
    out
}
