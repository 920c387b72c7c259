//! Machine configuration: TOML-serializable structs with paper presets.
//!
//! Latencies of caches are in CPU cycles (as the papers' simulator tables give them);
//! latencies of the memory device are in nanoseconds and converted with the CPU clock.

use serde::{Deserialize, Serialize};

use crate::device::DeviceConfig;
use crate::error::ConfigError;
use crate::paging::PageSize;
use crate::tlb::TlbConfig;

/// The in-order CPU: one cycle per instruction plus the latency of whatever served each
/// memory access, like gem5's `TimingSimpleCPU` (the CPU of LOC's evaluation, §IV-A).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuConfig {
    /// Clock in MHz; 1000 (1 GHz) as in LOC's evaluation (§IV-A).
    pub clock_mhz: u64,
}

impl Default for CpuConfig {
    fn default() -> Self {
        Self { clock_mhz: 1000 }
    }
}

impl CpuConfig {
    /// Cycles that `ns` nanoseconds take at this clock, rounded up.
    pub fn ns_to_cycles(&self, ns: u64) -> u64 {
        (ns * self.clock_mhz).div_ceil(1000)
    }
}

/// Replacement policy of a cache level (those of `pmlab-cache`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplacementPolicy {
    /// Least recently used.
    #[default]
    Lru,
    /// First in, first out.
    Fifo,
    /// Random victim (xoshiro256++ seeded with [`MachineConfig::cache_seed`]).
    Random,
    /// Tree pseudo-LRU.
    TreePlru,
}

fn yes() -> bool {
    true
}

/// One unified level of the cache hierarchy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheLevelConfig {
    /// Capacity in bytes.
    pub size: u64,
    /// Block (line) size in bytes; a multiple of the spine's 64-byte line.
    pub block_size: u64,
    /// Ways per set.
    pub assoc: u64,
    /// Cycles to access this level.
    pub latency_cycles: u64,
    /// Replacement policy (LRU when absent).
    #[serde(default)]
    pub repl: ReplacementPolicy,
    /// Write-back (`true`, the default) or write-through.
    #[serde(default = "yes")]
    pub write_back: bool,
    /// Write-allocate (`true`, the default) or not.
    #[serde(default = "yes")]
    pub write_allocate: bool,
}

/// Costs of the persist instructions beyond the memory writes they cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistConfig {
    /// Cycles to issue one line flush (any kind), before any write-back it causes.
    pub flush_issue_cycles: u64,
    /// Cycles of a fence with nothing outstanding.
    pub fence_cycles: u64,
}

impl Default for PersistConfig {
    fn default() -> Self {
        // One cycle to issue as an instruction; the fence drains the pipeline's store
        // buffer, which a TimingSimpleCPU does not have, so it costs an instruction too.
        Self {
            flush_issue_cycles: 1,
            fence_cycles: 1,
        }
    }
}

/// How addresses of the spine are translated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslationConfig {
    /// Page size of the page tables and TLB.
    pub page_size: PageSize,
    /// `true`: virtual page n maps to frame n (a flat persistent space); `false`: each
    /// address space gets frames on first touch from the page tables.
    pub identity: bool,
    /// The TLB; `None` translates without one (no TLB cost at all).
    pub tlb: Option<TlbConfig>,
    /// With `identity = false`: let `pmlab-os`'s placement policy choose frames
    /// (first-touch demand paging in frame order when absent).
    #[serde(default)]
    pub placement: Option<PlacementConfig>,
}

/// Page placement by the OS model (Kessler & Hill's policies, `pmlab-os`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementConfig {
    /// Policy name: `random`, `coloring`, `coloring-hash`, `bin-hopping`, `sequential`,
    /// `hierarchical`.
    pub policy: String,
    /// Bytes of the pool of available frames at the bottom of the OS's LRU list.
    pub pool_size: u64,
    /// Seed of the OS's and the policy's xoshiro256++ generators.
    pub seed: u64,
}

impl Default for TranslationConfig {
    fn default() -> Self {
        Self {
            page_size: PageSize::KIB_4,
            identity: true,
            tlb: Some(TlbConfig::default()),
            placement: None,
        }
    }
}

/// Chaos mode: random write-backs of dirty lines between operations, to explore
/// write-back orders the cache's replacement policy alone would never produce.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChaosConfig {
    /// Seed of the xoshiro256++ generator that picks moments and lines.
    pub seed: u64,
    /// Probability, before each operation, that one random dirty line is written back.
    pub probability: f64,
}

/// A whole machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// Physical memory size in bytes (a multiple of the page size).
    pub memory_size: u64,
    /// The CPU.
    #[serde(default)]
    pub cpu: CpuConfig,
    /// Address translation.
    #[serde(default)]
    pub translation: TranslationConfig,
    /// Cache levels, L1 first; empty means no caches (every store goes to memory).
    pub caches: Vec<CacheLevelConfig>,
    /// The memory device.
    pub device: DeviceConfig,
    /// Persist instruction costs.
    #[serde(default)]
    pub persist: PersistConfig,
    /// Chaos mode, off when absent.
    #[serde(default)]
    pub chaos: Option<ChaosConfig>,
    /// Seed of random cache replacement.
    #[serde(default)]
    pub cache_seed: u64,
    /// Costs of OS work: CR3 loads, system calls, page-table construction.
    #[serde(default)]
    pub os_costs: OsCostConfig,
}

/// Cycles the machine charges for OS work that the model does not execute
/// instruction by instruction (SpaceJMP, Table 2 and Figure 1).
///
/// The defaults are parameters taken from the SpaceJMP paper, not results: CR3 loads
/// of 130 and 224 cycles (untagged, tagged) and a 357-cycle system call are its Table 2
/// on M2 (DragonFly BSD); 48 cycles per page-table entry is its Figure 1 (about 5 ms to
/// build the tables of 1 GiB in 4 KiB pages on Linux, 262,144 entries, at M2's
/// 2.5 GHz); a table page costs the 64 line writes that zero it at that rate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsCostConfig {
    /// A CR3 load that flushes the TLB (no tag, or PCID without the no-flush bit).
    pub cr3_cycles: u64,
    /// A CR3 load with a tag and the no-flush bit.
    pub cr3_tagged_cycles: u64,
    /// A system call's entry and exit.
    pub syscall_cycles: u64,
    /// One page-table entry written (set or cleared) with the kernel's per-page work.
    pub entry_write_cycles: u64,
    /// One page-table page allocated (zeroed) or freed.
    pub table_page_cycles: u64,
    /// One message between cores (a cache-line handoff each way), for designs that
    /// send work to another process instead of switching.
    pub message_cycles: u64,
}

impl Default for OsCostConfig {
    fn default() -> Self {
        Self {
            cr3_cycles: 130,
            cr3_tagged_cycles: 224,
            syscall_cycles: 357,
            entry_write_cycles: 48,
            table_page_cycles: 64 * 48,
            // A message and its acknowledgement each move a cache line between two
            // cores, about 150 cycles apiece on the paper's Xeons.
            message_cycles: 300,
        }
    }
}

impl MachineConfig {
    /// LOC's evaluation machine (Lu et al., ICCD 2014, Table I): 1 GHz TimingSimpleCPU,
    /// L1 32 KB 2-way 1 cycle, L2 256 KB 8-way 8 cycles, LLC 1 MB 16-way 21 cycles, all
    /// 64-byte blocks with LRU, memory 168 cycles (the [`DeviceConfig::loc`] device).
    pub fn loc(memory_size: u64) -> Self {
        Self {
            memory_size,
            cpu: CpuConfig::default(),
            translation: TranslationConfig::default(),
            caches: vec![
                level(32 << 10, 2, 1),
                level(256 << 10, 8, 8),
                level(1 << 20, 16, 21),
            ],
            device: DeviceConfig::loc(),
            persist: PersistConfig::default(),
            chaos: None,
            cache_seed: 0,
            os_costs: OsCostConfig::default(),
        }
    }

    /// The LOC machine with another memory device (e.g. [`DeviceConfig::pcm`]).
    pub fn loc_with(memory_size: u64, device: DeviceConfig) -> Self {
        Self {
            device,
            ..Self::loc(memory_size)
        }
    }

    /// A machine with one tiny cache (`lines` 64-byte lines, a power of two, fully
    /// associative), for
    /// crash tests that want evictions to happen early and often.
    pub fn tiny(memory_size: u64, lines: u64) -> Self {
        Self {
            caches: vec![CacheLevelConfig {
                size: lines * 64,
                block_size: 64,
                assoc: lines,
                latency_cycles: 1,
                repl: ReplacementPolicy::Lru,
                write_back: true,
                write_allocate: true,
            }],
            ..Self::loc(memory_size)
        }
    }

    /// A preset by name: `loc` (LOC Table I) or `loc-<device>` with a device preset of
    /// [`DeviceConfig::preset`] (`loc-pcm`, `loc-pcm-aerie`, `loc-stt-ram`, `loc-dram`).
    pub fn preset(name: &str, memory_size: u64) -> Option<Self> {
        if name == "loc" {
            return Some(Self::loc(memory_size));
        }
        let device = DeviceConfig::preset(name.strip_prefix("loc-")?)?;
        Some(Self::loc_with(memory_size, device))
    }

    /// Parses a TOML document; `name` (a file name) is used in error messages.
    pub fn from_toml(name: &str, text: &str) -> Result<Self, ConfigError> {
        let cfg: Self = toml::from_str(text).map_err(|e| ConfigError::Toml {
            source_name: name.to_string(),
            message: e.to_string(),
        })?;
        cfg.validate().map_err(|e| e.in_source(name))?;
        Ok(cfg)
    }

    /// This configuration as a TOML document.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a machine configuration always serializes")
    }

    /// Checks every field; the error names the offending field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let page = self.translation.page_size.bytes();
        if self.memory_size > MAX_MEMORY_SIZE {
            return Err(ConfigError::field(
                "memory_size",
                format!(
                    "{} is more than the model's limit {MAX_MEMORY_SIZE}",
                    self.memory_size
                ),
            ));
        }
        if self.caches.len() > MAX_CACHE_LEVELS {
            return Err(ConfigError::field(
                "caches",
                format!(
                    "{} levels, more than the limit {MAX_CACHE_LEVELS}",
                    self.caches.len()
                ),
            ));
        }
        if self.memory_size == 0 || !self.memory_size.is_multiple_of(page) {
            return Err(ConfigError::field(
                "memory_size",
                format!(
                    "{} is not a positive multiple of the page size {page}",
                    self.memory_size
                ),
            ));
        }
        if self.cpu.clock_mhz == 0 {
            return Err(ConfigError::field(
                "cpu.clock_mhz",
                "must be positive".into(),
            ));
        }
        for (i, c) in self.caches.iter().enumerate() {
            let name = |f: &str| format!("caches[{i}].{f}");
            if c.block_size < 64 || !c.block_size.is_power_of_two() {
                return Err(ConfigError::field(
                    &name("block_size"),
                    format!("{} is not a power of two of at least 64", c.block_size),
                ));
            }
            if !c.assoc.is_power_of_two() {
                return Err(ConfigError::field(
                    &name("assoc"),
                    format!("{} is not a power of two", c.assoc),
                ));
            }
            if c.size > MAX_CACHE_SIZE {
                return Err(ConfigError::field(
                    &name("size"),
                    format!("{} is more than the model's limit {MAX_CACHE_SIZE}", c.size),
                ));
            }
            let sets = c.size / c.block_size / c.assoc.max(1);
            if sets == 0 || c.size != sets * c.block_size * c.assoc || !sets.is_power_of_two() {
                return Err(ConfigError::field(
                    &name("size"),
                    format!(
                        "{} is not block_size x assoc x a power-of-two number of sets",
                        c.size
                    ),
                ));
            }
        }
        if let Some(t) = &self.translation.tlb {
            t.validate()?;
        }
        if let Some(c) = &self.chaos
            && !(0.0..=1.0).contains(&c.probability)
        {
            return Err(ConfigError::field(
                "chaos.probability",
                format!("{} is not in [0, 1]", c.probability),
            ));
        }
        self.device.validate()
    }
}

/// The largest simulated memory: the machine keeps a byte image of all of it (lazily
/// zeroed by the kernel) and a counter per line, so a configuration read from a file may
/// not ask for more than this.
pub const MAX_MEMORY_SIZE: u64 = 64 << 30;
/// The largest simulated cache (its tag arrays are allocated up front).
pub const MAX_CACHE_SIZE: u64 = 1 << 30;
/// The most cache levels.
pub const MAX_CACHE_LEVELS: usize = 8;

fn level(size: u64, assoc: u64, latency_cycles: u64) -> CacheLevelConfig {
    CacheLevelConfig {
        size,
        block_size: 64,
        assoc,
        latency_cycles,
        repl: ReplacementPolicy::Lru,
        write_back: true,
        write_allocate: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_round_trip_of_every_preset() {
        for device in ["loc", "dram", "pcm", "pcm-aerie", "stt-ram"] {
            let mut cfg = MachineConfig::loc_with(1 << 20, DeviceConfig::preset(device).unwrap());
            cfg.chaos = Some(ChaosConfig {
                seed: 3,
                probability: 0.25,
            });
            let text = cfg.to_toml();
            assert_eq!(
                MachineConfig::from_toml("m.toml", &text).unwrap(),
                cfg,
                "{text}"
            );
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let mut cfg = MachineConfig::loc(1 << 20);
        cfg.caches[1].assoc = 3;
        let text = cfg.to_toml();
        let err = MachineConfig::from_toml("m.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("m.toml") && err.contains("caches[1].assoc"),
            "{err}"
        );
        let err = MachineConfig::from_toml("x.toml", "memory_size = \"big\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("x.toml:") && err.contains("line 1"),
            "{err}"
        );
        let text = MachineConfig::loc(1 << 20)
            .to_toml()
            .replace("memory_size = 1048576", "memory_size = 1000");
        let err = MachineConfig::from_toml("y.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(err.contains("memory_size"), "{err}");
    }

    #[test]
    fn presets_by_name() {
        let pcm = MachineConfig::preset("loc-pcm", 1 << 20).unwrap();
        assert_eq!(pcm.device, DeviceConfig::pcm());
        assert_eq!(pcm.caches.len(), 3);
        assert!(MachineConfig::preset("loc-flash", 1 << 20).is_none());
        assert!(MachineConfig::preset("loc", 1 << 20).is_some());
    }

    #[test]
    fn clock_conversion() {
        assert_eq!(CpuConfig { clock_mhz: 1000 }.ns_to_cycles(168), 168);
        assert_eq!(CpuConfig { clock_mhz: 2400 }.ns_to_cycles(150), 360);
        assert_eq!(CpuConfig { clock_mhz: 3 }.ns_to_cycles(1), 1);
    }
}
