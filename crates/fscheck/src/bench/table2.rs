//! The paper's microbenchmarks (Aerie, Table 2): 4 KiB sequential and random reads and
//! writes of one large file, and open, create, delete and append of small files.
//!
//! Each figure is the mean latency of one operation over a timed phase. Phases that
//! change metadata end with [`FileOps::sync`], so PXFS's batched updates are paid for
//! inside the phase ("because Aerie batches updates, we report average latency").

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::iobuf::IoBuf;
use super::ops::FileOps;
use pmlab_fs::error::Result;

/// The block every read and write moves (the paper: "a 4096-byte buffer").
pub const BLOCK: usize = 4096;

/// The operations of Table 2, in the paper's row order.
pub const OPS: [&str; 8] = [
    "seq-read",
    "seq-write",
    "rand-read",
    "rand-write",
    "open",
    "create",
    "delete",
    "append",
];

/// Sizes of the microbenchmarks.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// The large file of the sequential and random tests (the paper: 1 GB).
    pub file_bytes: u64,
    /// Bytes the random tests touch, 4 KiB at a time (the paper: 100 MB).
    pub random_bytes: u64,
    /// Small files opened, created and deleted (the paper: 1024 of 4 KiB).
    pub files: usize,
    /// 4 KiB appends to one file (the paper does not say; 1024 like the small files).
    pub appends: usize,
    /// Seed of the random offsets (xoshiro256++).
    pub seed: u64,
}

impl Sizes {
    /// The paper's sizes (1 GiB file, 100 MiB random, 1024 files and appends).
    pub fn paper() -> Sizes {
        Sizes {
            file_bytes: 1 << 30,
            random_bytes: 100 << 20,
            files: 1024,
            appends: 1024,
            seed: 1,
        }
    }
}

fn timed(ops: usize, f: impl FnOnce() -> Result<()>) -> Result<f64> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64() * 1e6 / ops.max(1) as f64)
}

/// Runs every microbenchmark once on `fs` (in directory `/t2`, which it creates and
/// leaves empty) and returns the mean microseconds per operation, in [`OPS`] order.
pub fn run<F: FileOps>(fs: &mut F, sizes: &Sizes) -> Result<[f64; 8]> {
    let mut out = [0.0; 8];
    fs.mkdir("/t2")?;
    large_file(fs, sizes, &mut out)?;
    small_files(fs, sizes, &mut out)?;
    Ok(out)
}

/// The large file's sequential and random reads and writes (`out[0..4]`).
fn large_file<F: FileOps>(fs: &mut F, sizes: &Sizes, out: &mut [f64; 8]) -> Result<()> {
    let blocks = (sizes.file_bytes / BLOCK as u64).max(1);
    let page = IoBuf::new(BLOCK, 0x5a);
    let mut buf = IoBuf::new(BLOCK, 0);
    // The large file is written once untimed, so the timed sequential write overwrites
    // allocated blocks as the paper's in-place test of an existing file does.
    let big = "/t2/big";
    let h = fs.create(big)?;
    let chunk = IoBuf::new(1 << 20, 0xa5);
    let mut left = blocks * BLOCK as u64;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        fs.write(h, &chunk[..n])?;
        left -= n as u64;
    }
    fs.close(h)?;
    fs.sync()?;
    fs.settle()?;

    let h = fs.open(big, true, false)?;
    out[0] = timed(blocks as usize, || {
        for _ in 0..blocks {
            fs.read(h, &mut buf)?;
        }
        Ok(())
    })?;
    out[1] = timed(blocks as usize, || {
        for b in 0..blocks {
            fs.pwrite(h, b * BLOCK as u64, &page)?;
        }
        fs.sync()
    })?;
    let randoms = (sizes.random_bytes / BLOCK as u64).max(1) as usize;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(sizes.seed);
    let offsets: Vec<u64> = (0..randoms)
        .map(|_| rng.gen_range(0..blocks) * BLOCK as u64)
        .collect();
    out[2] = timed(randoms, || {
        for &o in &offsets {
            fs.pread(h, o, &mut buf)?;
        }
        Ok(())
    })?;
    out[3] = timed(randoms, || {
        for &o in &offsets {
            fs.pwrite(h, o, &page)?;
        }
        fs.sync()
    })?;
    fs.close(h)?;
    fs.unlink(big)?;
    fs.sync()
}

/// Creating, opening, appending to and deleting small files (`out[4..8]`).
fn small_files<F: FileOps>(fs: &mut F, sizes: &Sizes, out: &mut [f64; 8]) -> Result<()> {
    let page = IoBuf::new(BLOCK, 0x5a);
    let n = sizes.files;
    let name = |k: usize| format!("/t2/f{k}");
    out[5] = timed(n, || {
        for k in 0..n {
            let h = fs.create(&name(k))?;
            fs.write(h, &page)?;
            fs.close(h)?;
        }
        fs.sync()
    })?;
    out[4] = timed(n, || {
        for k in 0..n {
            let h = fs.open(&name(k), false, false)?;
            fs.close(h)?;
        }
        Ok(())
    })?;
    let a = sizes.appends;
    let h = fs.open(&name(0), false, true)?;
    out[7] = timed(a, || {
        for _ in 0..a {
            fs.write(h, &page)?;
        }
        fs.sync()
    })?;
    fs.close(h)?;
    out[6] = timed(n, || {
        for k in 0..n {
            fs.unlink(&name(k))?;
        }
        fs.sync()
    })?;
    Ok(())
}
