//! The memory device: read and write latencies and per-line write counts (endurance).

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// Timing of a memory device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// A label for tables (e.g. "PCM").
    pub name: String,
    /// Nanoseconds to read one line.
    pub read_ns: u64,
    /// Nanoseconds to write one line.
    pub write_ns: u64,
    /// Banks: lines interleave over them and each serves one access at a time, so
    /// accesses to different banks overlap (see [`crate::memctl`]).
    pub banks: u64,
    /// Whether the device keeps its contents without power. Informational: a crash
    /// of a DRAM machine still yields what reached the device, which is what a
    /// flash-backed DRAM (one of the SCM technologies Aerie §2 lists) saves.
    pub non_volatile: bool,
}

impl DeviceConfig {
    /// The memory of LOC's evaluation (Lu et al., "Loose-Ordering Consistency for
    /// Persistent Memory", ICCD 2014, Table I): 8 banks, access latency 168 cycles at
    /// 1 GHz = 168 ns for reads and writes. LOC uses it as the persistent memory.
    pub fn loc() -> Self {
        Self {
            name: "LOC-NVM".into(),
            read_ns: 168,
            write_ns: 168,
            banks: 8,
            non_volatile: true,
        }
    }

    /// DRAM with the memory latency of LOC's Table I (168 cycles at 1 GHz), the only
    /// main-memory latency the papers give, and 8 banks; volatile.
    pub fn dram() -> Self {
        Self {
            name: "DRAM".into(),
            non_volatile: false,
            ..Self::loc()
        }
    }

    /// Phase-change memory as LOC §II-A reports it (citing its ref. \[27\]): 85 ns reads
    /// and 100–500 ns writes. We take the upper end, 500 ns, because write latency is
    /// what persistence protocols pay for and LOC argues from the pessimistic case; the
    /// bank count follows LOC's Table I.
    pub fn pcm() -> Self {
        Self {
            name: "PCM".into(),
            read_ns: 85,
            write_ns: 500,
            banks: 8,
            non_volatile: true,
        }
    }

    /// Phase-change memory as Aerie emulates it (Volos et al., "Storage-Class Memory
    /// Needs Flexible Interfaces", §5 Methodology): DRAM plus a 150 ns delay after each
    /// write; DRAM latency taken from LOC Table I.
    pub fn pcm_aerie() -> Self {
        Self {
            name: "PCM-Aerie".into(),
            write_ns: 168 + 150,
            ..Self::loc()
        }
    }

    /// STT-RAM as LOC §II-A reports it (citing its ref. \[27\]): "less than 20 ns for
    /// reads and writes"; we use 20 ns for both.
    pub fn stt_ram() -> Self {
        Self {
            name: "STT-RAM".into(),
            read_ns: 20,
            write_ns: 20,
            banks: 8,
            non_volatile: true,
        }
    }

    /// A preset by name: `loc`, `dram`, `pcm`, `pcm-aerie`, `stt-ram`.
    pub fn preset(name: &str) -> Option<Self> {
        Some(match name {
            "loc" => Self::loc(),
            "dram" => Self::dram(),
            "pcm" => Self::pcm(),
            "pcm-aerie" => Self::pcm_aerie(),
            "stt-ram" | "sttram" => Self::stt_ram(),
            _ => return None,
        })
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if self.banks == 0 || self.banks > 1 << 16 {
            return Err(ConfigError::field(
                "device.banks",
                format!("{} is not in 1 ..= 65536", self.banks),
            ));
        }
        Ok(())
    }
}

/// Endurance figures: how often the device's 64-byte lines were written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endurance {
    /// Line writes in total.
    pub total_line_writes: u64,
    /// Writes of the most-written line.
    pub max_line_writes: u64,
    /// Lines written at least once.
    pub lines_written: u64,
    /// `histogram[k]` counts lines written between `2^k` and `2^(k+1) - 1` times
    /// (lines never written are not counted).
    pub histogram: Vec<u64>,
}

/// The device's counters.
#[derive(Clone, Debug)]
pub struct Device {
    config: DeviceConfig,
    line_writes: Vec<u32>,
    reads: u64,
    writes: u64,
}

impl Device {
    /// A device of `size` bytes.
    pub fn new(config: DeviceConfig, size: u64) -> Self {
        Self {
            config,
            line_writes: vec![0; size.div_ceil(64) as usize],
            reads: 0,
            writes: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &DeviceConfig {
        &self.config
    }

    /// Counts a read of one block.
    pub fn note_read(&mut self) {
        self.reads += 1;
    }

    /// Counts a write of `[addr, addr + len)`: one write per 64-byte line it touches.
    pub fn note_write(&mut self, addr: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.writes += 1;
        for line in addr / 64..=(addr + len - 1) / 64 {
            let c = &mut self.line_writes[line as usize];
            *c = c.saturating_add(1);
        }
    }

    /// Read requests served.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// Write requests served.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// Writes of the line holding `addr`.
    pub fn line_writes(&self, addr: u64) -> u32 {
        self.line_writes[(addr / 64) as usize]
    }

    /// The endurance summary.
    pub fn endurance(&self) -> Endurance {
        let mut e = Endurance::default();
        for &c in &self.line_writes {
            if c == 0 {
                continue;
            }
            let c = u64::from(c);
            e.total_line_writes += c;
            e.max_line_writes = e.max_line_writes.max(c);
            e.lines_written += 1;
            let bucket = (63 - c.leading_zeros()) as usize;
            if e.histogram.len() <= bucket {
                e.histogram.resize(bucket + 1, 0);
            }
            e.histogram[bucket] += 1;
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endurance_histogram() {
        let mut d = Device::new(DeviceConfig::pcm(), 1024);
        d.note_write(0, 64);
        d.note_write(60, 8); // lines 0 and 1
        d.note_write(128, 1);
        let e = d.endurance();
        assert_eq!(e.total_line_writes, 4);
        assert_eq!(e.max_line_writes, 2);
        assert_eq!(e.lines_written, 3);
        assert_eq!(e.histogram, vec![2, 1]);
        assert_eq!(d.writes(), 3);
    }
}
