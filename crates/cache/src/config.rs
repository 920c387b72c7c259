//! Cache and hierarchy configurations, and their validation.

/// Replacement policy of a set-associative cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Replacement {
    /// Least recently used (Dinero IV `l`).
    Lru,
    /// First in, first out (Dinero IV `f`).
    Fifo,
    /// Uniformly random victim among the valid blocks of a full set (Dinero IV `r`).
    ///
    /// Draws come from pmlab's seeded xoshiro256++ generator, so runs are reproducible
    /// for a given seed; Dinero IV draws from its own generator, whose sequence pmlab
    /// does not reproduce bit for bit, so counters of random caches agree with Dinero IV
    /// only statistically.
    Random,
    /// Tree pseudo-LRU (pmlab extension, flag letter `p`): one bit per internal node of a
    /// binary tree over the ways; invalid ways are filled first.
    TreePlru,
}

impl Replacement {
    /// The Dinero IV flag letter (`l`, `f`, `r`, `p`).
    pub fn letter(self) -> char {
        match self {
            Replacement::Lru => 'l',
            Replacement::Fifo => 'f',
            Replacement::Random => 'r',
            Replacement::TreePlru => 'p',
        }
    }
}

/// One cache: geometry and policies. Caches are physically indexed and tagged; block and
/// sub-block are the same size (Dinero IV's default), fetch is on demand only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheConfig {
    /// Capacity in bytes (a power of two).
    pub size: u64,
    /// Block (line) size in bytes (a power of two, at least 4).
    pub block_size: u64,
    /// Ways per set: 1 is direct-mapped, `size / block_size` is fully associative.
    pub assoc: u64,
    /// Replacement policy.
    pub repl: Replacement,
    /// Write-back (`true`) or write-through (`false`).
    pub write_back: bool,
    /// Write-allocate (`true`) or no-write-allocate (`false`).
    pub write_allocate: bool,
    /// Classify misses into compulsory, capacity and conflict (Dinero IV `-lN-Tccc`).
    pub ccc: bool,
}

impl CacheConfig {
    /// A direct-mapped, LRU, write-back, write-allocate cache without miss classification:
    /// Dinero IV's defaults for the given size and block size.
    pub fn new(size: u64, block_size: u64) -> Self {
        CacheConfig {
            size,
            block_size,
            assoc: 1,
            repl: Replacement::Lru,
            write_back: true,
            write_allocate: true,
            ccc: false,
        }
    }

    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.size / (self.block_size * self.assoc)
    }

    /// Checks the geometry; `name` (e.g. `l1-dcache`) goes into the error.
    pub fn validate(&self, name: &str) -> Result<(), ConfigError> {
        let bad = |field: &'static str, message: String| {
            Err(ConfigError::Field {
                cache: name.to_string(),
                field,
                message,
            })
        };
        if self.size == 0 || !self.size.is_power_of_two() {
            return bad("size", format!("{} is not a power of two", self.size));
        }
        if self.block_size < 4 || !self.block_size.is_power_of_two() {
            return bad(
                "block size",
                format!("{} is not a power of two of at least 4", self.block_size),
            );
        }
        if self.block_size > 1 << 30 {
            return bad(
                "block size",
                format!("{} is larger than 1 GiB", self.block_size),
            );
        }
        if self.assoc == 0 {
            return bad("associativity", "must be at least 1".to_string());
        }
        if self.block_size.saturating_mul(self.assoc) > self.size {
            return bad(
                "associativity",
                format!(
                    "{} ways of {} bytes exceed the cache size {}",
                    self.assoc, self.block_size, self.size
                ),
            );
        }
        // With size and block size powers of two, the ways divide the cache into whole
        // sets exactly when the associativity is a power of two.
        if !self.assoc.is_power_of_two() {
            return bad(
                "associativity",
                format!(
                    "{} does not divide the {} blocks of the cache into sets (use a power of two)",
                    self.assoc,
                    self.size / self.block_size
                ),
            );
        }
        if self.size / self.block_size > 1 << 28 {
            return bad(
                "size",
                format!(
                    "{} blocks; at most 2^28 blocks per cache are supported",
                    self.size / self.block_size
                ),
            );
        }
        Ok(())
    }
}

/// One level of a hierarchy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// One cache for instructions and data.
    Unified(CacheConfig),
    /// Separate instruction and data caches.
    Split {
        /// Serves instruction fetches.
        instr: CacheConfig,
        /// Serves reads, writes and misc references.
        data: CacheConfig,
    },
}

/// Most levels a hierarchy may have (as in Dinero IV).
pub const MAX_LEVELS: usize = 5;

/// A cache hierarchy, level 1 (closest to the processor) first. Below a split level may
/// come a split or a unified level; below a unified level only unified levels (as in
/// Dinero IV). The instruction side of a split level feeds the instruction side of a
/// split level below it, the data side the data side; both feed a unified level.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HierarchyConfig {
    /// The levels, level 1 first.
    pub levels: Vec<Level>,
}

impl HierarchyConfig {
    /// Checks every cache and the shape of the hierarchy.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.levels.is_empty() {
            return Err(ConfigError::Shape(
                "a hierarchy needs at least one level".into(),
            ));
        }
        if self.levels.len() > MAX_LEVELS {
            return Err(ConfigError::Shape(format!(
                "{} levels; at most {MAX_LEVELS} are supported",
                self.levels.len()
            )));
        }
        let mut unified_above = None;
        for (i, level) in self.levels.iter().enumerate() {
            let n = i + 1;
            match level {
                Level::Unified(c) => {
                    c.validate(&format!("l{n}-ucache"))?;
                    unified_above = Some(n);
                }
                Level::Split { instr, data } => {
                    if let Some(u) = unified_above {
                        return Err(ConfigError::Shape(format!(
                            "level {u} cache is unified, level {n} is not"
                        )));
                    }
                    instr.validate(&format!("l{n}-icache"))?;
                    data.validate(&format!("l{n}-dcache"))?;
                }
            }
        }
        Ok(())
    }
}

/// An invalid cache or hierarchy configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// One field of one cache is invalid.
    #[error("{cache}: {field}: {message}")]
    Field {
        /// The cache, in Dinero IV's naming (`l2-ucache`).
        cache: String,
        /// The field (`size`, `block size`, `associativity`, ...).
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The hierarchy's shape is invalid.
    #[error("hierarchy: {0}")]
    Shape(String),
}
