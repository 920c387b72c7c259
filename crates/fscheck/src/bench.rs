//! Benchmarks of the file system beside the kernel's: one file interface over PXFS and
//! a kernel directory ([`ops`]), the paper's microbenchmarks (Table 2, [`table2`]), and
//! `pmlab fs bench`'s entry point ([`run`]): PXFS and a kernel directory the caller
//! names (tmpfs or ext4) in the same run, each figure the median over repetitions of
//! the mean latency per operation. `pmlab reproduce aerie` drives the same code with
//! the paper's sizes and adds FileBench's personalities.

pub mod iobuf;
pub mod ops;
pub mod table2;

use std::path::{Path, PathBuf};

pub use iobuf::IoBuf;
pub use ops::{FileOps, Handle, KernelDir, PxfsMount, PxfsVolume, VolumeSize};

use pmlab_fs::error::{FsError, Result};

/// What `pmlab fs bench` measures.
#[derive(Clone, Debug)]
pub struct Config {
    /// A scratch directory for the Aerie volume.
    pub scratch: PathBuf,
    /// A directory on the kernel file system to compare with.
    pub peer: PathBuf,
    /// Small files opened, created and deleted, and appends; the large file of the
    /// read and write tests is `files` x 4 KiB, all of it touched at random.
    pub files: usize,
    /// Repetitions (the median is reported).
    pub reps: usize,
}

/// One line of the result: mean microseconds per operation.
#[derive(Clone, Debug)]
pub struct Row {
    /// Operation (one of [`table2::OPS`]).
    pub op: &'static str,
    /// PXFS.
    pub pxfs_us: f64,
    /// The kernel file system at `peer`.
    pub peer_us: f64,
}

/// The median of `v` (the upper middle for an even count); NaN for none.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs the microbenchmarks on PXFS and on `cfg.peer`, alternating repetitions.
pub fn run(cfg: &Config) -> Result<Vec<Row>> {
    let bytes = (cfg.files.max(1) * table2::BLOCK) as u64;
    let sizes = table2::Sizes {
        file_bytes: bytes,
        random_bytes: bytes,
        files: cfg.files.max(1),
        appends: cfg.files.max(1),
        seed: 1,
    };
    let mut px = Vec::new();
    let mut pe = Vec::new();
    for _ in 0..cfg.reps.max(1) {
        let mut vol = PxfsVolume::create(
            &cfg.scratch,
            VolumeSize {
                data_bytes: 2 * bytes + (cfg.files as u64 + 1) * 8192,
                inodes: cfg.files as u64 + 64,
                kv_object_bytes: 4096,
            },
        )?;
        px.push(table2::run(&mut vol, &sizes)?);
        vol.destroy()?;
        let dir = tempdir_in(&cfg.peer)?;
        let mut k = KernelDir::new(fs_type(&cfg.peer), &dir);
        let r = table2::run(&mut k, &sizes);
        let _ = std::fs::remove_dir_all(&dir);
        pe.push(r?);
    }
    Ok(table2::OPS
        .iter()
        .enumerate()
        .map(|(i, op)| Row {
            op,
            pxfs_us: median(&px.iter().map(|r| r[i]).collect::<Vec<_>>()),
            peer_us: median(&pe.iter().map(|r| r[i]).collect::<Vec<_>>()),
        })
        .collect())
}

/// A new empty directory under `parent` for one benchmark run.
pub fn tempdir_in(parent: &Path) -> Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = parent.join(format!(
        "pmlab-bench-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).map_err(|e| FsError::io(d.display().to_string(), e))?;
    Ok(d)
}

/// Where `path` lives: the file-system type name from /proc/mounts (best match).
pub fn fs_type(path: &Path) -> String {
    let p = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && p.starts_with(f[1])).then(|| (f[1].len(), f[2].to_string()))
        })
        .max()
        .map(|x| x.1)
        .unwrap_or_else(|| "unknown".into())
}
