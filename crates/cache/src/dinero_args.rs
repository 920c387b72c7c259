//! Dinero IV's command line: `-lN-Tfield value` cache flags and the global flags, parsed
//! into a [`HierarchyConfig`] plus run options, and Dinero IV's "Summary of options".

use crate::config::{CacheConfig, ConfigError, HierarchyConfig, Level, MAX_LEVELS, Replacement};
use std::fmt::Write;

/// A rejected command line: the flag and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// A flag pmlab does not know.
    #[error("{0:?}: unrecognized option (see -help)")]
    Unknown(String),
    /// A flag that needs a value came last.
    #[error("{0:?}: missing value")]
    MissingValue(String),
    /// A flag's value does not parse or is out of range.
    #[error("{flag} {value}: {message}")]
    BadValue {
        /// The flag.
        flag: String,
        /// The value given.
        value: String,
        /// What is wrong.
        message: String,
    },
    /// A Dinero IV feature pmlab does not implement.
    #[error("{flag}: {message}")]
    Unsupported {
        /// The flag.
        flag: String,
        /// What is not supported.
        message: String,
    },
    /// The caches described do not form a valid hierarchy.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Flags missing for a cache, or mixed unified and split flags at one level.
    #[error("{0}")]
    Incomplete(String),
}

/// The per-cache flags as given (zero / `None` = not given), indexed `[u,i,d][level]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct CacheFlags {
    size: Option<u64>,
    bsize: Option<u64>,
    sbsize: Option<u64>,
    assoc: Option<u64>,
    repl: Option<char>,
    fetch: Option<char>,
    walloc: Option<char>,
    wback: Option<char>,
    ccc: bool,
}

impl CacheFlags {
    fn any(&self) -> bool {
        *self != CacheFlags::default()
    }
}

/// A parsed `pmlab dinero` command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DineroArgs {
    /// The caches.
    pub hierarchy: HierarchyConfig,
    /// `-informat`: `D` (extended din), `d` (traditional din), or a pmlab trace format
    /// name understood by the trace crate.
    pub informat: String,
    /// `-skipcount`: references read and ignored before simulation.
    pub skipcount: u64,
    /// `-maxcount`: stop after this many references (0: no limit).
    pub maxcount: u64,
    /// `-flushcount`: copy back and invalidate every cache every this many references.
    pub flushcount: u64,
    /// `-stat-interval`: print the statistics every this many references.
    pub stat_interval: u64,
    /// `-stat-idcombine`: report each split level's two caches together.
    pub stat_idcombine: bool,
    /// `-help` was given.
    pub help: bool,
    /// `-seed` (pmlab extension): seed of the xoshiro256++ generator for random
    /// replacement (default 1).
    pub seed: u64,
    flags: Vec<[CacheFlags; 3]>,
}

const IDU: [char; 3] = ['u', 'i', 'd'];

/// Dinero IV's `argscale_uint`: decimal digits with an optional `k`, `m` or `g` suffix.
pub fn parse_scaled(value: &str) -> Option<u64> {
    let (digits, shift) = match value.as_bytes().last()? {
        b'k' | b'K' => (&value[..value.len() - 1], 10),
        b'm' | b'M' => (&value[..value.len() - 1], 20),
        b'g' | b'G' => (&value[..value.len() - 1], 30),
        _ => (value, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let x: u64 = digits.parse().ok()?;
    x.checked_mul(1u64 << shift).filter(|v| *v < (1u64 << 48))
}

fn bad(flag: &str, value: &str, message: &str) -> ArgError {
    ArgError::BadValue {
        flag: flag.into(),
        value: value.into(),
        message: message.into(),
    }
}

fn scaled(flag: &str, value: &str) -> Result<u64, ArgError> {
    parse_scaled(value).ok_or_else(|| {
        bad(
            flag,
            value,
            "expected an unsigned integer, optionally with k, m or g",
        )
    })
}

fn pow2(flag: &str, value: &str) -> Result<u64, ArgError> {
    let v = scaled(flag, value)?;
    if !v.is_power_of_two() {
        return Err(bad(flag, value, "must be a power of two"));
    }
    Ok(v)
}

fn one_char(flag: &str, value: &str, allowed: &str, what: &str) -> Result<char, ArgError> {
    let mut it = value.chars();
    match (it.next(), it.next()) {
        (Some(c), None) if allowed.contains(c) => Ok(c),
        _ => Err(bad(flag, value, what)),
    }
}

/// Level `n` (from 1) from its unified, instruction and data caches' flags.
fn level(n: usize, [u, i, d]: &[CacheFlags; 3]) -> Result<Level, ArgError> {
    let split = i.any() || d.any();
    if u.any() && split {
        return Err(ArgError::Incomplete(format!(
            "level {n} has i or d together with u cache parameters"
        )));
    }
    if u.any() {
        return Ok(Level::Unified(cache(n, u, 0)?));
    }
    if !split {
        return Err(ArgError::Incomplete(format!(
            "no level {n} cache specified"
        )));
    }
    if !i.any() || !d.any() {
        let missing = if i.any() { 'd' } else { 'i' };
        return Err(ArgError::Incomplete(format!(
            "level {n}: a split level needs both caches; -l{n}-{missing}size and -l{n}-{missing}bsize are missing"
        )));
    }
    Ok(Level::Split {
        instr: cache(n, i, 1)?,
        data: cache(n, d, 2)?,
    })
}

/// The cache of level `n` on side `idu` (0 unified, 1 instruction, 2 data) from its flags.
fn cache(n: usize, f: &CacheFlags, idu: usize) -> Result<CacheConfig, ArgError> {
    let t = IDU[idu];
    let size = f.size.ok_or_else(|| {
        ArgError::Incomplete(format!(
            "level {n} {t}cache: size not specified (-l{n}-{t}size)"
        ))
    })?;
    let bsize = f.bsize.ok_or_else(|| {
        ArgError::Incomplete(format!(
            "level {n} {t}cache: block size not specified (-l{n}-{t}bsize)"
        ))
    })?;
    if let Some(sb) = f.sbsize.filter(|&sb| sb != bsize) {
        return Err(unsupported(
            &format!("-l{n}-{t}sbsize"),
            format!(
                "{sb}: sub-blocks are not implemented; the sub-block size must equal the block size {bsize}"
            ),
        ));
    }
    let assoc = f.assoc.unwrap_or(1);
    if assoc == 0 {
        return Err(bad(&format!("-l{n}-{t}assoc"), "0", "must be at least 1"));
    }
    let repl = match f.repl.unwrap_or('l') {
        'f' => Replacement::Fifo,
        'r' => Replacement::Random,
        'p' => Replacement::TreePlru,
        _ => Replacement::Lru,
    };
    let c = CacheConfig {
        size,
        block_size: bsize,
        assoc,
        repl,
        write_back: f.wback.unwrap_or('a') == 'a',
        write_allocate: f.walloc.unwrap_or('a') == 'a',
        ccc: f.ccc,
    };
    c.validate(&format!("l{n}-{t}cache"))?;
    Ok(c)
}

/// `-on-trigger`/`-off-trigger`: a hexadecimal address, of which only 0 (no trigger) is
/// implemented.
fn check_trigger(flag: &str, v: &str) -> Result<(), ArgError> {
    let hex = v
        .strip_prefix("0x")
        .or_else(|| v.strip_prefix("0X"))
        .unwrap_or(v);
    let n =
        u64::from_str_radix(hex, 16).map_err(|_| bad(flag, v, "expected a hexadecimal address"))?;
    if n != 0 {
        return Err(unsupported(
            flag,
            "trigger addresses are not implemented; only 0 is accepted",
        ));
    }
    Ok(())
}

/// Splits `-lN-Tfield` into (level index, idu index, field).
fn level_idu(flag: &str) -> Option<(usize, usize, &str)> {
    let rest = flag.strip_prefix("-l")?;
    let dash = rest.find('-')?;
    let level: usize = rest[..dash].parse().ok()?;
    if !(1..=MAX_LEVELS).contains(&level) || !rest[..dash].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = &rest[dash + 1..];
    let t = rest.chars().next()?;
    let idu = IDU.iter().position(|&c| c == t)?;
    Some((level - 1, idu, &rest[1..]))
}

/// The next command-line word, as the value of the flag before it.
type Value<'a, 'b> = &'b mut dyn FnMut() -> Result<&'a str, ArgError>;

fn unsupported(flag: &str, message: impl Into<String>) -> ArgError {
    ArgError::Unsupported {
        flag: flag.into(),
        message: message.into(),
    }
}

impl CacheFlags {
    /// Sets `field` of this cache (`idu`: 0 unified, 1 instruction, 2 data) from `flag`'s
    /// value.
    fn set<'a>(
        &mut self,
        flag: &str,
        idu: usize,
        field: &str,
        value: Value<'a, '_>,
    ) -> Result<(), ArgError> {
        match field {
            "size" => self.size = Some(scaled(flag, value()?)?),
            "bsize" => self.bsize = Some(pow2(flag, value()?)?),
            "sbsize" => self.sbsize = Some(pow2(flag, value()?)?),
            "assoc" => {
                let v = value()?;
                let n: u64 = v
                    .parse()
                    .ok()
                    .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| bad(flag, v, "expected an unsigned integer"))?;
                self.assoc = Some(n);
            }
            "repl" => {
                self.repl = Some(one_char(
                    flag,
                    value()?,
                    "lfrp",
                    "expected l (LRU), f (FIFO), r (random) or p (tree pseudo-LRU)",
                )?)
            }
            "fetch" => {
                let c = one_char(flag, value()?, "damtls", "expected one of d, a, m, t, l, s")?;
                if c != 'd' {
                    let why = format!("fetch policy {c}: only demand fetch (d) is implemented");
                    return Err(unsupported(flag, why));
                }
                self.fetch = Some(c);
            }
            "pfdist" | "pfabort" => {
                if value()? != "0" {
                    return Err(unsupported(flag, "prefetching is not implemented"));
                }
            }
            "walloc" | "wback" => self.set_write_policy(flag, idu, field, value()?)?,
            "ccc" => self.ccc = true,
            _ => return Err(ArgError::Unknown(flag.into())),
        }
        Ok(())
    }

    /// `-lN-Twalloc` or `-lN-Twback`.
    fn set_write_policy(
        &mut self,
        flag: &str,
        idu: usize,
        field: &str,
        v: &str,
    ) -> Result<(), ArgError> {
        let c = one_char(flag, v, "anf", "expected a (always), n (never) or f")?;
        if idu == 1 {
            return Err(bad(flag, v, "an instruction cache has no write policy"));
        }
        if c == 'f' {
            return Err(unsupported(
                flag,
                "policy f (only without fetch) is not implemented; use a or n",
            ));
        }
        if field == "walloc" {
            self.walloc = Some(c);
        } else {
            self.wback = Some(c);
        }
        Ok(())
    }
}

impl DineroArgs {
    /// Parses Dinero IV flags (without the program name).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<DineroArgs, ArgError> {
        let mut a = DineroArgs {
            hierarchy: HierarchyConfig { levels: Vec::new() },
            informat: "D".into(),
            skipcount: 0,
            maxcount: 0,
            flushcount: 0,
            stat_interval: 0,
            stat_idcombine: false,
            help: false,
            seed: 1,
            flags: vec![Default::default(); MAX_LEVELS],
        };
        let mut words = args.iter().map(AsRef::as_ref);
        while let Some(flag) = words.next() {
            let mut value = || {
                words
                    .next()
                    .ok_or_else(|| ArgError::MissingValue(flag.into()))
            };
            if a.global_flag(flag, &mut value)? {
                continue;
            }
            let (lev, idu, field) =
                level_idu(flag).ok_or_else(|| ArgError::Unknown(flag.into()))?;
            a.flags[lev][idu].set(flag, idu, field, &mut value)?;
        }
        if a.help {
            return Ok(a);
        }
        a.hierarchy = a.build()?;
        Ok(a)
    }

    /// Applies `flag` if it is one of the global (not per-cache) flags; false if not.
    fn global_flag<'a>(&mut self, flag: &str, value: Value<'a, '_>) -> Result<bool, ArgError> {
        match flag {
            "-help" => self.help = true,
            "-stat-idcombine" => self.stat_idcombine = true,
            "-copyright" | "-contact" | "-dineroIII" | "-custom" => {
                return Err(unsupported(flag, "not provided by pmlab (see -help)"));
            }
            "-skipcount" => self.skipcount = scaled(flag, value()?)?,
            "-maxcount" => self.maxcount = scaled(flag, value()?)?,
            "-flushcount" => self.flushcount = scaled(flag, value()?)?,
            "-stat-interval" => self.stat_interval = scaled(flag, value()?)?,
            "-seed" => {
                let v = value()?;
                self.seed = v
                    .parse()
                    .map_err(|_| bad(flag, v, "expected an unsigned integer"))?;
            }
            "-informat" => {
                let v = value()?;
                if v.is_empty() || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                    return Err(bad(flag, v, "expected a trace format name such as D or d"));
                }
                self.informat = v.into();
            }
            "-on-trigger" | "-off-trigger" => check_trigger(flag, value()?)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn build(&self) -> Result<HierarchyConfig, ArgError> {
        let maxlevel = self
            .flags
            .iter()
            .rposition(|l| l.iter().any(|f| f.any()))
            .map(|p| p + 1);
        let Some(maxlevel) = maxlevel else {
            return Err(ArgError::Incomplete(
                "cache size and block size must be specified, e.g.: -l1-isize 16k -l1-dsize 8192 -l1-ibsize 32 -l1-dbsize 16".into(),
            ));
        };
        let levels = (0..maxlevel)
            .map(|lev| level(lev + 1, &self.flags[lev]))
            .collect::<Result<Vec<_>, _>>()?;
        let h = HierarchyConfig { levels };
        h.validate()?;
        Ok(h)
    }

    /// Dinero IV's "Summary of options" block (the lines after its heading), one line per
    /// setting, in Dinero IV's order.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        let levels = &self.hierarchy.levels;
        // [idu][level] -> config
        let get = |idu: usize, lev: usize| -> Option<&CacheConfig> {
            match (levels.get(lev)?, idu) {
                (Level::Unified(c), 0) => Some(c),
                (Level::Split { instr, .. }, 1) => Some(instr),
                (Level::Split { data, .. }, 2) => Some(data),
                _ => None,
            }
        };
        let each =
            |out: &mut String, field: &str, f: &dyn Fn(usize, &CacheConfig) -> Option<String>| {
                for (idu, t) in IDU.iter().enumerate() {
                    for lev in 0..levels.len() {
                        if let Some(v) = get(idu, lev).and_then(|c| f(idu, c)) {
                            let _ = writeln!(out, "-l{}-{t}{field}{v}", lev + 1);
                        }
                    }
                }
            };
        each(&mut out, "size", &|_, c| Some(format!(" {}", c.size)));
        each(&mut out, "bsize", &|_, c| {
            Some(format!(" {}", c.block_size))
        });
        each(&mut out, "sbsize", &|_, c| {
            Some(format!(" {}", c.block_size))
        });
        each(&mut out, "assoc", &|_, c| Some(format!(" {}", c.assoc)));
        each(&mut out, "repl", &|_, c| {
            Some(format!(" {}", c.repl.letter()))
        });
        each(&mut out, "fetch", &|_, _| Some(" d".into()));
        let yn = |b: bool| if b { " a" } else { " n" };
        each(&mut out, "walloc", &|idu, c| {
            (idu != 1).then(|| yn(c.write_allocate).into())
        });
        each(&mut out, "wback", &|idu, c| {
            (idu != 1).then(|| yn(c.write_back).into())
        });
        each(&mut out, "ccc", &|_, c| c.ccc.then(String::new));
        let _ = writeln!(out, "-skipcount {}", self.skipcount);
        let _ = writeln!(out, "-flushcount {}", self.flushcount);
        let _ = writeln!(out, "-maxcount {}", self.maxcount);
        let _ = writeln!(out, "-stat-interval {}", self.stat_interval);
        let _ = writeln!(out, "-informat {}", self.informat);
        let _ = writeln!(out, "-on-trigger 0x0");
        let _ = writeln!(out, "-off-trigger 0x0");
        if self.stat_idcombine {
            let _ = writeln!(out, "-stat-idcombine");
        }
        out
    }
}

/// The `-help` text.
pub fn usage() -> String {
    "Usage: pmlab dinero [options] < trace
Dinero IV-compatible cache simulation (pmlab). Cache options are -lN-Tfield, where N is
the level (1 to 5) and T is u (unified), i (instruction) or d (data):
 -lN-Tsize U      Size in bytes (k, m, g suffixes allowed; a power of two)
 -lN-Tbsize P     Block size (a power of two, at least 4)
 -lN-Tsbsize P    Sub-block size (only equal to the block size is supported)
 -lN-Tassoc U     Associativity (default 1)
 -lN-Trepl C      Replacement: l=LRU (default), f=FIFO, r=random (pmlab draws from a
                  seeded xoshiro256++, not Dinero IV's generator), p=tree pseudo-LRU
                  (pmlab extension)
 -lN-Tfetch C     Fetch policy: only d (demand) is supported
 -lN-Twalloc C    Write allocate: a=always (default), n=never
 -lN-Twback C     Write back: a=always (default), n=never (write-through)
 -lN-Tccc         Compulsory/capacity/conflict miss classification
 -skipcount U     Skip the first U references
 -flushcount U    Copy back and invalidate the caches every U references
 -maxcount U      Stop after U references
 -stat-interval U Print statistics every U references
 -stat-idcombine  Report split caches' statistics together
 -informat F      Trace format: D (extended din, default), d (traditional din), or a
                  pmlab trace format name
 -seed N          Seed for random replacement (pmlab extension, default 1)
 -on-trigger A / -off-trigger A   Only 0 (no trigger) is supported
 -help            This message
"
    .to_string()
}

/// The Dinero IV flags that describe `h` (the inverse of [`DineroArgs::parse`] for the
/// cache flags), e.g. to run `dineroIV` on the same configuration.
pub fn hierarchy_flags(h: &HierarchyConfig) -> Vec<String> {
    let mut out = Vec::new();
    for (i, level) in h.levels.iter().enumerate() {
        let mut push = |t: char, c: &CacheConfig| {
            let n = i + 1;
            let mut f = |field: &str, v: String| {
                out.push(format!("-l{n}-{t}{field}"));
                if !v.is_empty() {
                    out.push(v);
                }
            };
            f("size", c.size.to_string());
            f("bsize", c.block_size.to_string());
            f("assoc", c.assoc.to_string());
            f("repl", c.repl.letter().to_string());
            if t != 'i' {
                f("walloc", if c.write_allocate { "a" } else { "n" }.into());
                f("wback", if c.write_back { "a" } else { "n" }.into());
            }
            if c.ccc {
                f("ccc", String::new());
            }
        };
        match level {
            Level::Unified(c) => push('u', c),
            Level::Split { instr, data } => {
                push('i', instr);
                push('d', data);
            }
        }
    }
    out
}
