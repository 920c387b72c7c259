//! Multiprogramming: several per-process traces merged round-robin, as Kessler & Hill's
//! Mult1/Mult2 traces interleave the processes of a time-shared workstation.
//!
//! Each input is one process with its own address space, identified by the process id
//! the interleaver stamps on its references. The running process keeps the processor
//! for a quantum (a number of instruction fetches, or of references), then the next
//! live process runs. The paper reports the quanta of its traces: Mult2 switches on
//! average every 134,000 instructions, Mult2.2 every 214,000, Mult1 every 138,000 and
//! Mult1.2 every 195,000 ([`Interleave::MULT2`] and friends). Their traces recorded the
//! real, varying switch points; a fixed quantum is the deterministic equivalent a
//! reproduction can state. When a process's trace ends it leaves the rotation, the
//! others continue, and the end is reported ([`Interleave::ended`]) so an OS model can
//! free the process's frames at that point.

use crate::{Asid, DEFAULT_BATCH, Kind, Ref, RefSource, TraceError};

/// What a quantum counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchUnit {
    /// Instruction fetches: the quantum ends before the fetch that would exceed it, so
    /// the data references of a process's last instruction stay with it.
    Instructions,
    /// References of any kind (for traces without instruction fetches).
    References,
}

/// The end of one process's trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessEnd {
    /// The process that ended.
    pub asid: Asid,
    /// How many references the interleaver had produced (over all processes) when it
    /// ended: its last reference is at index `at_ref - 1` of the merged trace.
    pub at_ref: u64,
    /// How many references the process issued.
    pub refs: u64,
    /// How many instruction fetches the process issued.
    pub instructions: u64,
}

/// One process in the rotation.
struct Process {
    asid: Asid,
    source: Box<dyn RefSource + Send>,
    pending: Vec<Ref>,
    next: usize,
    refs: u64,
    instructions: u64,
}

/// A [`RefSource`] that interleaves per-process sources round-robin.
pub struct Interleave {
    live: Vec<Process>,
    current: usize,
    quantum: u64,
    unit: SwitchUnit,
    used: u64,
    produced: u64,
    switches: u64,
    ended: Vec<ProcessEnd>,
}

impl Interleave {
    /// Kessler & Hill's Mult2 trace: 134,000 instructions between switches on average.
    pub const MULT2: u64 = 134_000;
    /// Kessler & Hill's Mult2.2 trace: the Mult2 workload switching every 214,000 instructions.
    pub const MULT2_2: u64 = 214_000;
    /// Kessler & Hill's Mult1 trace: 138,000 instructions between switches.
    pub const MULT1: u64 = 138_000;
    /// Kessler & Hill's Mult1.2 trace: the Mult1 workload switching every 195,000 instructions.
    pub const MULT1_2: u64 = 195_000;

    /// An interleaver with a quantum of `quantum` units (0 is taken as 1) and no processes.
    pub fn new(quantum: u64, unit: SwitchUnit) -> Self {
        Interleave {
            live: Vec::new(),
            current: 0,
            quantum: quantum.max(1),
            unit,
            used: 0,
            produced: 0,
            switches: 0,
            ended: Vec::new(),
        }
    }

    /// Adds a process with id `asid` whose references come from `source` (their own asid
    /// fields are replaced). Processes run in the order they were added.
    pub fn add(&mut self, asid: Asid, source: Box<dyn RefSource + Send>) -> &mut Self {
        self.live.push(Process {
            asid,
            source,
            pending: Vec::with_capacity(DEFAULT_BATCH),
            next: 0,
            refs: 0,
            instructions: 0,
        });
        self
    }

    /// The processes whose traces have ended, in the order they ended.
    pub fn ended(&self) -> &[ProcessEnd] {
        &self.ended
    }

    /// Removes and returns the ends reported so far.
    pub fn drain_ended(&mut self) -> Vec<ProcessEnd> {
        std::mem::take(&mut self.ended)
    }

    /// Context switches performed so far (a process ending is not counted).
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// Process ids still running.
    pub fn live_pids(&self) -> Vec<u16> {
        self.live.iter().map(|p| p.asid).collect()
    }

    fn switch_to_next(&mut self) {
        self.used = 0;
        // A lone process keeps running: a new quantum, but no switch.
        if self.live.len() > 1 {
            self.current = (self.current + 1) % self.live.len();
            self.switches += 1;
        }
    }
}

impl RefSource for Interleave {
    fn next_batch(&mut self, out: &mut Vec<Ref>) -> Result<usize, TraceError> {
        out.clear();
        if out.capacity() == 0 {
            out.reserve(DEFAULT_BATCH);
        }
        let cap = out.capacity();
        while out.len() < cap && !self.live.is_empty() {
            let p = &mut self.live[self.current];
            if p.next == p.pending.len() {
                p.next = 0;
                if p.source.next_batch(&mut p.pending)? == 0 {
                    let p = self.live.remove(self.current);
                    self.ended.push(ProcessEnd {
                        asid: p.asid,
                        at_ref: self.produced,
                        refs: p.refs,
                        instructions: p.instructions,
                    });
                    self.used = 0;
                    if self.current == self.live.len() {
                        self.current = 0;
                    }
                    continue;
                }
            }
            let mut switch = false;
            let start = out.len();
            for r in &p.pending[p.next..] {
                if out.len() == cap {
                    break;
                }
                let counts = match self.unit {
                    SwitchUnit::Instructions => r.kind == Kind::Instr,
                    SwitchUnit::References => true,
                };
                if counts {
                    if self.used == self.quantum {
                        switch = true;
                        break;
                    }
                    self.used += 1;
                }
                p.instructions += (r.kind == Kind::Instr) as u64;
                out.push(Ref { asid: p.asid, ..*r });
            }
            let taken = out.len() - start;
            p.next += taken;
            p.refs += taken as u64;
            self.produced += taken as u64;
            if switch {
                self.switch_to_next();
            }
        }
        Ok(out.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{VecSource, read_all};

    fn instrs(n: usize, base: u64) -> Vec<Ref> {
        (0..n as u64)
            .map(|i| Ref {
                addr: base + i,
                size: 4,
                kind: Kind::Instr,
                asid: 0,
            })
            .collect()
    }

    #[test]
    fn round_robin_with_quantum_and_ends() {
        let mut il = Interleave::new(2, SwitchUnit::Instructions);
        il.add(7, Box::new(VecSource::new(instrs(3, 0))));
        il.add(9, Box::new(VecSource::new(instrs(6, 100))));
        let refs = read_all(&mut il).unwrap();
        let order: Vec<(u16, u64)> = refs.iter().map(|r| (r.asid, r.addr)).collect();
        assert_eq!(
            order,
            vec![
                (7, 0),
                (7, 1),
                (9, 100),
                (9, 101),
                (7, 2),
                (9, 102),
                (9, 103),
                (9, 104),
                (9, 105)
            ]
        );
        assert_eq!(
            il.ended()[0],
            ProcessEnd {
                asid: 7,
                at_ref: 5,
                refs: 3,
                instructions: 3
            }
        );
        assert_eq!(il.ended()[1].asid, 9);
        assert_eq!(il.ended()[1].at_ref, 9);
    }

    #[test]
    fn data_references_stay_with_their_instruction() {
        let a = vec![
            Ref {
                addr: 0,
                size: 4,
                kind: Kind::Instr,
                asid: 0,
            },
            Ref {
                addr: 1,
                size: 4,
                kind: Kind::Read,
                asid: 0,
            },
            Ref {
                addr: 2,
                size: 4,
                kind: Kind::Instr,
                asid: 0,
            },
        ];
        let mut il = Interleave::new(1, SwitchUnit::Instructions);
        il.add(1, Box::new(VecSource::new(a)));
        il.add(2, Box::new(VecSource::new(instrs(1, 50))));
        let refs = read_all(&mut il).unwrap();
        let order: Vec<(u16, u64)> = refs.iter().map(|r| (r.asid, r.addr)).collect();
        assert_eq!(order, vec![(1, 0), (1, 1), (2, 50), (1, 2)]);
    }
}
