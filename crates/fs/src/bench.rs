//! `pmlab fs bench`: the paper's microbenchmarks (Table 2: create, open, read, write,
//! append, delete of 4 KiB files), PXFS and KVFS side by side with the kernel's file
//! system on a directory the caller names (tmpfs or ext4), in the same run. Each figure
//! is the median over repetitions of the mean latency per operation.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{FsError, Result};
use crate::pxfs::{OpenFlags, Pxfs};

/// What to measure.
#[derive(Clone, Debug)]
pub struct Config {
    /// A scratch directory for the Aerie volume.
    pub scratch: PathBuf,
    /// A directory on the kernel file system to compare with.
    pub peer: PathBuf,
    /// Files per operation kind.
    pub files: usize,
    /// Repetitions (the median is reported).
    pub reps: usize,
}

/// One line of the result: mean microseconds per operation.
#[derive(Clone, Debug)]
pub struct Row {
    /// Operation.
    pub op: &'static str,
    /// PXFS.
    pub pxfs_us: f64,
    /// The kernel file system at `peer`.
    pub peer_us: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time(n: usize, f: impl FnOnce() -> Result<()>) -> Result<f64> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

fn io(e: std::io::Error) -> FsError {
    FsError::io("peer file system", e)
}

/// Runs the microbenchmarks.
pub fn run(cfg: &Config) -> Result<Vec<Row>> {
    let ops = ["create", "open", "read", "write", "append", "delete"];
    let mut px: Vec<Vec<f64>> = vec![Vec::new(); ops.len()];
    let mut pe: Vec<Vec<f64>> = vec![Vec::new(); ops.len()];
    let page = vec![0x5au8; 4096];
    let n = cfg.files;
    for rep in 0..cfg.reps {
        let vol = cfg.scratch.join(format!("vol{rep}"));
        let sock = cfg.scratch.join(format!("sock{rep}"));
        let params = crate::layout::Params {
            meta_pages: 16384,
            inodes: 31 * 1024,
            domain_pages: 65536,
            ..Default::default()
        };
        crate::volume::create(&vol, &params, crate::mkfs::RootOwner::current_user(0o755))?;
        let svc = crate::service::spawn(&vol, &sock, crate::service::Config::default())?;
        let fs = Pxfs::mount(&sock)?;
        fs.mkdir("/b", 0o755)?;
        let name = |k: usize| format!("/b/f{k}");
        let peer_dir = cfg
            .peer
            .join(format!("pmlab-fs-bench-{}-{rep}", std::process::id()));
        std::fs::create_dir_all(&peer_dir).map_err(io)?;
        let pname = |k: usize| peer_dir.join(format!("f{k}"));
        let mut buf = vec![0u8; 4096];

        px[0].push(time(n, || {
            for k in 0..n {
                let fd = fs.create(&name(k), 0o644)?;
                fs.write(fd, &page)?;
                fs.close(fd)?;
            }
            fs.sync()
        })?);
        pe[0].push(time(n, || {
            for k in 0..n {
                std::fs::File::create(pname(k))
                    .and_then(|mut f| f.write_all(&page))
                    .map_err(io)?;
            }
            Ok(())
        })?);
        px[1].push(time(n, || {
            for k in 0..n {
                let fd = fs.open(&name(k), OpenFlags::default())?;
                fs.close(fd)?;
            }
            Ok(())
        })?);
        pe[1].push(time(n, || {
            for k in 0..n {
                drop(std::fs::File::open(pname(k)).map_err(io)?);
            }
            Ok(())
        })?);
        let fd = fs.open(
            &name(0),
            OpenFlags {
                write: true,
                ..Default::default()
            },
        )?;
        let mut pf = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(pname(0))
            .map_err(io)?;
        px[2].push(time(n, || {
            for _ in 0..n {
                fs.pread(fd, 0, &mut buf)?;
            }
            Ok(())
        })?);
        pe[2].push(time(n, || {
            use std::os::unix::fs::FileExt;
            for _ in 0..n {
                pf.read_exact_at(&mut buf, 0).map_err(io)?;
            }
            Ok(())
        })?);
        px[3].push(time(n, || {
            for _ in 0..n {
                fs.pwrite(fd, 0, &page)?;
            }
            Ok(())
        })?);
        pe[3].push(time(n, || {
            use std::os::unix::fs::FileExt;
            for _ in 0..n {
                pf.write_all_at(&page, 0).map_err(io)?;
            }
            Ok(())
        })?);
        fs.close(fd)?;
        let afd = fs.open(
            &name(1),
            OpenFlags {
                write: true,
                append: true,
                ..Default::default()
            },
        )?;
        px[4].push(time(n, || {
            for _ in 0..n {
                fs.write(afd, &page)?;
            }
            fs.sync()
        })?);
        fs.close(afd)?;
        let mut af = std::fs::OpenOptions::new()
            .append(true)
            .open(pname(1))
            .map_err(io)?;
        pe[4].push(time(n, || {
            for _ in 0..n {
                af.write_all(&page).map_err(io)?;
            }
            Ok(())
        })?);
        let _ = pf.read(&mut buf);
        px[5].push(time(n, || {
            for k in 0..n {
                fs.unlink(&name(k))?;
            }
            fs.sync()
        })?);
        pe[5].push(time(n, || {
            for k in 0..n {
                std::fs::remove_file(pname(k)).map_err(io)?;
            }
            Ok(())
        })?);
        drop(fs);
        svc.stop()?;
        let _ = std::fs::remove_dir_all(&peer_dir);
        let _ = std::fs::remove_dir_all(&vol);
    }
    Ok(ops
        .iter()
        .enumerate()
        .map(|(i, op)| Row {
            op,
            pxfs_us: median(px[i].clone()),
            peer_us: median(pe[i].clone()),
        })
        .collect())
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
