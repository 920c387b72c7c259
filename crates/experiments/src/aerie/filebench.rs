//! FileBench's fileserver, webserver, webproxy and varmail personalities, reimplemented
//! from FileBench's own `workloads/*.f`: the same filesets (nfiles, meandirwidth,
//! meanfilesize, prealloc) and the same flowop sequence per iteration, run by one thread
//! (the paper reports the latency of one iteration).
//!
//! Choices FileBench makes that are kept: file sizes are drawn from a gamma distribution
//! with shape 1.5 (FileBench's default `filesizegamma` of 1500) and the fileset's mean;
//! `createfile` picks a file that does not exist, `openfile`, `deletefile` and
//! `statfile` one that does, uniformly at random; `appendfilerand` appends a size drawn
//! uniformly from 1 to its iosize; `readwholefile` and `writewholefile` move the file in
//! iosize pieces. Where FileBench draws each directory's width from a gamma distribution
//! with mean `meandirwidth`, every directory here holds exactly `meandirwidth` entries
//! and the tree is round(ln nfiles / ln meandirwidth) levels deep (at least one), so a
//! path has the mean depth FileBench aims for. Every random choice comes from one
//! xoshiro256++ generator seeded by the caller.

use std::time::Instant;

use pmlab_fs::Result;
use pmlab_fscheck::bench::{FileOps, Handle};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

/// A FileBench personality.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Personality {
    /// `fileserver.f`: create/write, append, read, delete, stat.
    Fileserver,
    /// `webserver.f`: ten open/read/close and one append to a log.
    Webserver,
    /// `webproxy.f`: delete, create/append/close, five open/read/close.
    Webproxy,
    /// `varmail.f`: delete, create/append/fsync, open/read/append/fsync, open/read.
    Varmail,
}

/// One FileBench flowop. `fd` slots are FileBench's `fd=1` (the only one these
/// personalities use for fileset files; webserver's log is `fd=2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Flowop {
    /// `createfile`: a file that does not exist, opened for writing.
    CreateFile,
    /// `writewholefile`: the file's whole (drawn) size in iosize pieces.
    WriteWholeFile,
    /// `appendfilerand` on the open file, iosize = the personality's append size.
    AppendFileRand,
    /// `closefile`.
    CloseFile,
    /// `openfile` of an existing file.
    OpenFile,
    /// `readwholefile` in iosize pieces.
    ReadWholeFile,
    /// `deletefile` of an existing file.
    DeleteFile,
    /// `statfile` of an existing file.
    StatFile,
    /// `fsync` of the open file.
    Fsync,
    /// webserver's `appendfilerand` to the one-file `logfiles` fileset (fd=2).
    AppendLog,
}

/// Every flowop kind, in the order counts are reported.
pub const FLOWOPS: [Flowop; 10] = [
    Flowop::CreateFile,
    Flowop::WriteWholeFile,
    Flowop::AppendFileRand,
    Flowop::CloseFile,
    Flowop::OpenFile,
    Flowop::ReadWholeFile,
    Flowop::DeleteFile,
    Flowop::StatFile,
    Flowop::Fsync,
    Flowop::AppendLog,
];

impl Flowop {
    /// FileBench's name of the flowop.
    pub fn name(self) -> &'static str {
        match self {
            Flowop::CreateFile => "createfile",
            Flowop::WriteWholeFile => "writewholefile",
            Flowop::AppendFileRand => "appendfilerand",
            Flowop::CloseFile => "closefile",
            Flowop::OpenFile => "openfile",
            Flowop::ReadWholeFile => "readwholefile",
            Flowop::DeleteFile => "deletefile",
            Flowop::StatFile => "statfile",
            Flowop::Fsync => "fsync",
            Flowop::AppendLog => "appendfilerand(log)",
        }
    }
}

use Flowop::*;

const FILESERVER: &[Flowop] = &[
    CreateFile,
    WriteWholeFile,
    CloseFile,
    OpenFile,
    AppendFileRand,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    DeleteFile,
    StatFile,
];
const WEBSERVER: &[Flowop] = &[
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    AppendLog,
];
const WEBPROXY: &[Flowop] = &[
    DeleteFile,
    CreateFile,
    AppendFileRand,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
];
const VARMAIL: &[Flowop] = &[
    DeleteFile,
    CreateFile,
    AppendFileRand,
    Fsync,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    AppendFileRand,
    Fsync,
    CloseFile,
    OpenFile,
    ReadWholeFile,
    CloseFile,
];

/// A fileset and the sizes a personality runs with.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Params {
    /// Files in the fileset (`$nfiles`).
    pub nfiles: usize,
    /// Entries per directory (`$meandirwidth`).
    pub meandirwidth: usize,
    /// Mean file size in bytes (`$meanfilesize`).
    pub meanfilesize: u64,
    /// Piece size of whole-file reads and writes (`$iosize`).
    pub iosize: u64,
    /// Upper bound of `appendfilerand` sizes (`$meanappendsize`, webproxy's `$meaniosize`).
    pub appendsize: u64,
    /// Percent of the files that exist before the run (`prealloc`).
    pub prealloc: u32,
    /// Iterations timed.
    pub iterations: usize,
}

impl Personality {
    /// All four, in the order tables list them.
    pub const ALL: [Personality; 4] = [
        Personality::Fileserver,
        Personality::Webserver,
        Personality::Webproxy,
        Personality::Varmail,
    ];

    /// Lower-case name, as FileBench's file is named.
    pub fn name(self) -> &'static str {
        match self {
            Personality::Fileserver => "fileserver",
            Personality::Webserver => "webserver",
            Personality::Webproxy => "webproxy",
            Personality::Varmail => "varmail",
        }
    }

    /// The flowops of one iteration, in FileBench's order.
    pub fn flowops(self) -> &'static [Flowop] {
        match self {
            Personality::Fileserver => FILESERVER,
            Personality::Webserver => WEBSERVER,
            Personality::Webproxy => WEBPROXY,
            Personality::Varmail => VARMAIL,
        }
    }

    /// FileBench's defaults from its `.f` file.
    pub fn filebench_defaults(self) -> Params {
        let p = |nfiles, meandirwidth, meanfilesize, appendsize, prealloc| Params {
            nfiles,
            meandirwidth,
            meanfilesize,
            iosize: 1 << 20,
            appendsize,
            prealloc,
            iterations: 1000,
        };
        match self {
            Personality::Fileserver => p(10_000, 20, 128 << 10, 16 << 10, 80),
            Personality::Webserver => p(1000, 20, 16 << 10, 16 << 10, 100),
            Personality::Webproxy => p(10_000, 1_000_000, 16 << 10, 16 << 10, 80),
            Personality::Varmail => p(1000, 1_000_000, 16 << 10, 16 << 10, 80),
        }
    }

    /// The paper's variant (§6.2): Fileserver and Webservice with 10,000 files, directory
    /// width 20, 1 MB I/O and mean sizes 128 KB and 16 KB; Webproxy with 1000 files,
    /// width 1500, 16 KB files. Varmail, which the paper does not run, keeps FileBench's
    /// defaults.
    pub fn paper(self) -> Params {
        let d = self.filebench_defaults();
        match self {
            Personality::Fileserver => d,
            Personality::Webserver => Params {
                nfiles: 10_000,
                ..d
            },
            Personality::Webproxy => Params {
                nfiles: 1000,
                meandirwidth: 1500,
                ..d
            },
            Personality::Varmail => d,
        }
    }
}

/// How many flowops of each kind ran, in [`FLOWOPS`] order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts(pub [u64; FLOWOPS.len()]);

impl Counts {
    fn add(&mut self, op: Flowop) {
        self.0[op as usize] += 1;
    }

    /// The count of one flowop kind.
    pub fn of(&self, op: Flowop) -> u64 {
        self.0[op as usize]
    }

    /// What `iterations` iterations of `p` define.
    pub fn expected(p: Personality, iterations: usize) -> Counts {
        let mut c = Counts::default();
        for _ in 0..iterations {
            for &op in p.flowops() {
                c.add(op);
            }
        }
        c
    }
}

/// A gamma-distributed sample (Marsaglia & Tsang's method, shape >= 1), as FileBench
/// draws file sizes with `gamma_dist_knuth(1.5, mean / 1.5)`.
pub fn gamma(rng: &mut Xoshiro256PlusPlus, shape: f64, scale: f64) -> f64 {
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        // A standard normal by Box-Muller.
        let u1: f64 = rng.r#gen::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = rng.r#gen();
        let x = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = rng.r#gen();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v * scale;
        }
    }
}

/// FileBench's default `filesizegamma` / 1000.
pub const SIZE_GAMMA_SHAPE: f64 = 1.5;

/// The fileset: paths, drawn sizes, and which files exist.
pub struct Fileset {
    /// Path of every file.
    pub paths: Vec<String>,
    /// Directories to create, parents first.
    pub dirs: Vec<String>,
    /// Drawn size of every file.
    pub sizes: Vec<u64>,
    exists: Vec<usize>,
    free: Vec<usize>,
    slot: Vec<usize>,
    /// Largest size any file may have (KVFS's fixed object size); 0 for no limit.
    pub cap: u64,
}

impl Fileset {
    /// Lays out `p.nfiles` files under `root` and draws their sizes; `p.prealloc`
    /// percent of them (the first ones drawn) are marked existing.
    pub fn new(root: &str, p: &Params, cap: u64, rng: &mut Xoshiro256PlusPlus) -> Fileset {
        let n = p.nfiles.max(1);
        let w = p.meandirwidth.max(2);
        let levels = ((n as f64).ln() / (w as f64).ln()).round().max(1.0) as u32;
        let mut dirs = vec![root.to_string()];
        let mut seen = std::collections::HashSet::new();
        let mut paths = Vec::with_capacity(n);
        for k in 0..n {
            let mut comps = Vec::new();
            let mut rest = k;
            for level in 0..levels {
                // The top level takes whatever is left, so no two files share a path.
                let i = if level + 1 == levels { rest } else { rest % w };
                comps.push(format!("{}{i}", if level == 0 { 'f' } else { 'd' }));
                rest /= w;
            }
            comps.reverse();
            let mut path = root.to_string();
            for (i, c) in comps.iter().enumerate() {
                path.push('/');
                path.push_str(c);
                if i + 1 < comps.len() && seen.insert(path.clone()) {
                    dirs.push(path.clone());
                }
            }
            paths.push(path);
        }
        let scale = p.meanfilesize as f64 / SIZE_GAMMA_SHAPE;
        let sizes = (0..n)
            .map(|_| {
                let s = gamma(rng, SIZE_GAMMA_SHAPE, scale) as u64;
                if cap > 0 { s.min(cap) } else { s }
            })
            .collect();
        let pre = n * p.prealloc.min(100) as usize / 100;
        Fileset {
            paths,
            dirs,
            sizes,
            exists: (0..pre).collect(),
            free: (pre..n).collect(),
            slot: (0..n).map(|k| if k < pre { k } else { k - pre }).collect(),
            cap,
        }
    }

    /// Files that exist now.
    pub fn existing(&self) -> &[usize] {
        &self.exists
    }

    fn pick(list: &[usize], rng: &mut Xoshiro256PlusPlus) -> Option<usize> {
        (!list.is_empty()).then(|| list[rng.gen_range(0..list.len())])
    }

    fn moved(&mut self, k: usize, to_exists: bool) {
        let (from, to) = if to_exists {
            (&mut self.free, &mut self.exists)
        } else {
            (&mut self.exists, &mut self.free)
        };
        let i = self.slot[k];
        from.swap_remove(i);
        if let Some(&m) = from.get(i) {
            self.slot[m] = i;
        }
        self.slot[k] = to.len();
        to.push(k);
    }
}

/// What a personality runs against: FileBench's flowops on the open file in slot 1.
pub trait Target {
    /// Name for tables.
    fn name(&self) -> String;
    /// Creates the fileset's directories and preallocated files (untimed).
    fn populate(&mut self, set: &Fileset, log: Option<(&str, u64)>) -> Result<()>;
    /// `createfile` of file `k`.
    fn create(&mut self, set: &Fileset, k: usize) -> Result<()>;
    /// `writewholefile`: `size` bytes in `iosize` pieces to the open file.
    fn write_whole(&mut self, size: u64, iosize: u64) -> Result<()>;
    /// `appendfilerand`: `n` bytes at the end of the open file.
    fn append(&mut self, n: u64) -> Result<()>;
    /// `closefile`.
    fn close(&mut self) -> Result<()>;
    /// `openfile` of file `k`.
    fn open(&mut self, set: &Fileset, k: usize) -> Result<()>;
    /// `readwholefile` of the open file in `iosize` pieces.
    fn read_whole(&mut self, iosize: u64) -> Result<()>;
    /// `deletefile` of file `k`.
    fn delete(&mut self, set: &Fileset, k: usize) -> Result<()>;
    /// `statfile` of file `k`.
    fn stat(&mut self, set: &Fileset, k: usize) -> Result<()>;
    /// `fsync` of the open file.
    fn fsync(&mut self) -> Result<()>;
    /// `appendfilerand` of `n` bytes to the log file.
    fn append_log(&mut self, n: u64) -> Result<()>;
    /// Ships batched work after the timed loop (counted in the last iteration).
    fn finish(&mut self) -> Result<()>;
}

/// The measurement of one personality on one target.
#[derive(Clone, Debug, Serialize)]
pub struct Run {
    /// Mean microseconds per iteration.
    pub us_per_iteration: f64,
    /// Flowops executed.
    pub counts: Counts,
    /// Flowops skipped because the fileset had no file to pick.
    pub skipped: u64,
}

/// Path of webserver's log file (the one-file `logfiles` fileset).
pub const LOG_PATH: &str = "/fb/log";

/// Runs `p.iterations` iterations of `personality` on `t`, after populating a fresh
/// fileset under `/fb`. `cap` bounds file sizes (0: none).
pub fn run(
    personality: Personality,
    p: &Params,
    cap: u64,
    seed: u64,
    t: &mut dyn Target,
) -> Result<Run> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut set = Fileset::new("/fb", p, cap, &mut rng);
    let log = (personality == Personality::Webserver).then(|| {
        let s = gamma(
            &mut rng,
            SIZE_GAMMA_SHAPE,
            p.meanfilesize as f64 / SIZE_GAMMA_SHAPE,
        );
        (LOG_PATH, s as u64)
    });
    t.populate(&set, log)?;
    let mut counts = Counts::default();
    let mut skipped = 0;
    let mut current: Option<usize> = None;
    let append = |rng: &mut Xoshiro256PlusPlus| rng.gen_range(1..=p.appendsize.max(1));
    let start = Instant::now();
    for _ in 0..p.iterations {
        for &op in personality.flowops() {
            let done = match op {
                CreateFile => match Fileset::pick(&set.free, &mut rng) {
                    Some(k) => {
                        t.create(&set, k)?;
                        set.moved(k, true);
                        current = Some(k);
                        true
                    }
                    None => false,
                },
                OpenFile => match Fileset::pick(&set.exists, &mut rng) {
                    Some(k) => {
                        t.open(&set, k)?;
                        current = Some(k);
                        true
                    }
                    None => false,
                },
                DeleteFile => match Fileset::pick(&set.exists, &mut rng) {
                    Some(k) => {
                        t.delete(&set, k)?;
                        set.moved(k, false);
                        true
                    }
                    None => false,
                },
                StatFile => match Fileset::pick(&set.exists, &mut rng) {
                    Some(k) => t.stat(&set, k).map(|_| true)?,
                    None => false,
                },
                WriteWholeFile | AppendFileRand | CloseFile | ReadWholeFile | Fsync => {
                    match current {
                        Some(k) => {
                            match op {
                                WriteWholeFile => t.write_whole(set.sizes[k], p.iosize)?,
                                AppendFileRand => {
                                    let n = append(&mut rng);
                                    t.append(n)?
                                }
                                ReadWholeFile => t.read_whole(p.iosize)?,
                                Fsync => t.fsync()?,
                                _ => {
                                    t.close()?;
                                    current = None;
                                }
                            }
                            true
                        }
                        None => false,
                    }
                }
                AppendLog => {
                    let n = append(&mut rng);
                    t.append_log(n)?;
                    true
                }
            };
            if done {
                counts.add(op);
            } else {
                skipped += 1;
            }
        }
    }
    t.finish()?;
    let us = start.elapsed().as_secs_f64() * 1e6 / p.iterations.max(1) as f64;
    Ok(Run {
        us_per_iteration: us,
        counts,
        skipped,
    })
}

/// Runs personalities through a [`FileOps`] file system (PXFS, tmpfs, ext4).
pub struct PosixTarget<'a, F: FileOps> {
    fs: &'a mut F,
    open: Option<Handle>,
    log: Option<Handle>,
    buf: Vec<u8>,
}

impl<'a, F: FileOps> PosixTarget<'a, F> {
    /// Drives `fs`; whole-file transfers use a buffer of `iosize` bytes.
    pub fn new(fs: &'a mut F, iosize: u64) -> Self {
        PosixTarget {
            fs,
            open: None,
            log: None,
            buf: vec![0x3c; iosize.max(1) as usize],
        }
    }

    fn fd(&self) -> Result<Handle> {
        self.open
            .ok_or_else(|| pmlab_fs::FsError::BadHandle("no file open in slot 1".into()))
    }

    fn write_n(&mut self, h: Handle, mut n: u64) -> Result<()> {
        while n > 0 {
            let k = n.min(self.buf.len() as u64) as usize;
            self.fs.write(h, &self.buf[..k])?;
            n -= k as u64;
        }
        Ok(())
    }
}

impl<F: FileOps> Target for PosixTarget<'_, F> {
    fn name(&self) -> String {
        self.fs.name().to_string()
    }
    fn populate(&mut self, set: &Fileset, log: Option<(&str, u64)>) -> Result<()> {
        for d in &set.dirs {
            self.fs.mkdir(d)?;
        }
        for &k in set.existing() {
            let h = self.fs.create(&set.paths[k])?;
            self.write_n(h, set.sizes[k])?;
            self.fs.close(h)?;
        }
        if let Some((path, size)) = log {
            let h = self.fs.create(path)?;
            self.write_n(h, size)?;
            self.fs.close(h)?;
            self.log = Some(self.fs.open(path, false, true)?);
        }
        self.fs.sync()
    }
    fn create(&mut self, set: &Fileset, k: usize) -> Result<()> {
        self.open = Some(self.fs.create(&set.paths[k])?);
        Ok(())
    }
    fn write_whole(&mut self, size: u64, iosize: u64) -> Result<()> {
        let h = self.fd()?;
        let mut left = size;
        while left > 0 {
            let k = left.min(iosize).min(self.buf.len() as u64) as usize;
            self.fs.write(h, &self.buf[..k])?;
            left -= k as u64;
        }
        Ok(())
    }
    fn append(&mut self, n: u64) -> Result<()> {
        // Files are opened for appending (see `open`), so writes land at the end as
        // FileBench's seek-to-end-then-write does.
        let h = self.fd()?;
        self.write_n(h, n)
    }
    fn close(&mut self) -> Result<()> {
        let h = self.fd()?;
        self.open = None;
        self.fs.close(h)
    }
    fn open(&mut self, set: &Fileset, k: usize) -> Result<()> {
        // FileBench opens O_RDWR; appending mode puts appends at the end and leaves
        // reads starting at offset 0, and no personality writes in place after opening.
        self.open = Some(self.fs.open(&set.paths[k], false, true)?);
        Ok(())
    }
    fn read_whole(&mut self, iosize: u64) -> Result<()> {
        let h = self.fd()?;
        let n = (iosize as usize).min(self.buf.len());
        while self.fs.read(h, &mut self.buf[..n])? > 0 {}
        Ok(())
    }
    fn delete(&mut self, set: &Fileset, k: usize) -> Result<()> {
        self.fs.unlink(&set.paths[k])
    }
    fn stat(&mut self, set: &Fileset, k: usize) -> Result<()> {
        self.fs.stat(&set.paths[k]).map(drop)
    }
    fn fsync(&mut self) -> Result<()> {
        let h = self.fd()?;
        self.fs.fsync(h)
    }
    fn append_log(&mut self, n: u64) -> Result<()> {
        let h = self
            .log
            .ok_or_else(|| pmlab_fs::FsError::BadHandle("no log file open".into()))?;
        self.write_n(h, n)
    }
    fn finish(&mut self) -> Result<()> {
        if let Some(h) = self.log.take() {
            self.fs.close(h)?;
        }
        self.fs.sync()
    }
}
