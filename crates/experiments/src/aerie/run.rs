//! Runs every benchmark on every file system, repetition by repetition, each on a
//! fresh volume or directory.

use std::path::Path;

use pmlab_fscheck::bench::{KernelDir, PxfsVolume, VolumeSize, table2, tempdir_in};
use serde::Serialize;

use super::ext4::Ext4Loop;
use super::filebench::{self, Counts, Params, Personality, PosixTarget, Run};
use super::kv::KvTarget;
use super::{AerieError, Config};

/// Table 2 samples of one file system: per repetition, microseconds per operation in
/// `table2::OPS` order.
#[derive(Clone, Debug, Serialize)]
pub struct Table2Samples {
    /// File system.
    pub system: String,
    /// One array per repetition.
    pub samples: Vec<[f64; 8]>,
}

/// FileBench samples of one personality on one file system.
#[derive(Clone, Debug, Serialize)]
pub struct FilebenchSamples {
    /// The personality.
    pub personality: Personality,
    /// Its parameters.
    pub params: Params,
    /// File system.
    pub system: String,
    /// Microseconds per iteration, one per repetition.
    pub samples: Vec<f64>,
    /// Flowops executed in the last repetition.
    pub counts: Counts,
    /// Flowops skipped in the last repetition (no file to pick).
    pub skipped: u64,
}

/// Everything measured.
#[derive(Clone, Debug, Serialize)]
pub struct Measurements {
    /// Table 2, per file system.
    pub table2: Vec<Table2Samples>,
    /// Figure 2 (and varmail), per personality and file system.
    pub filebench: Vec<FilebenchSamples>,
    /// Why ext4 did not run, if it did not.
    pub ext4_skipped: Option<String>,
}

fn fs_err(what: String) -> impl FnOnce(pmlab_fs::FsError) -> AerieError {
    move |source| AerieError::Fs { what, source }
}

/// The systems a personality runs on: KVFS only where its interface fits (webproxy).
fn systems_for(p: Personality, ext4: bool) -> Vec<&'static str> {
    let mut v = vec!["tmpfs"];
    if ext4 {
        v.push("ext4");
    }
    v.push("PXFS");
    if p == Personality::Webproxy {
        v.push("KVFS");
    }
    v
}

fn volume_for(p: &Params, cap: u64, kv: bool) -> VolumeSize {
    let file = p.meanfilesize + p.appendsize;
    let mut data = 3 * p.nfiles as u64 * p.meanfilesize + 2 * p.iterations as u64 * file;
    if kv {
        // Every put takes a whole fixed-size object.
        data += (p.nfiles + p.iterations) as u64 * cap;
    }
    VolumeSize {
        data_bytes: data + (64 << 20),
        inodes: 2 * p.nfiles as u64 + 256,
        kv_object_bytes: cap.max(4096),
    }
}

fn kernel_run<T>(
    name: &str,
    parent: &Path,
    f: impl FnOnce(&mut KernelDir) -> pmlab_fs::Result<T>,
) -> pmlab_fs::Result<T> {
    let dir = tempdir_in(parent)?;
    let mut k = KernelDir::new(name, &dir);
    let r = f(&mut k);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// Runs Table 2 and the personalities on every file system, `config.reps` times.
pub fn measure(config: &Config) -> Result<Measurements, AerieError> {
    let (ext4, ext4_skipped) = if config.ext4 {
        match Ext4Loop::mount(&config.scratch, &config.mount_parent, config.ext4_bytes) {
            Ok(m) => (Some(m), None),
            Err(why) => {
                eprintln!("ext4 on a loop device skipped: {why}");
                (None, Some(why))
            }
        }
    } else {
        (None, Some("not requested (--no-ext4)".to_string()))
    };
    let t2_systems: Vec<&str> = ["tmpfs", "ext4", "PXFS"]
        .into_iter()
        .filter(|_| config.run_table2)
        .filter(|s| *s != "ext4" || ext4.is_some())
        .collect();
    let steps = config.reps
        * (t2_systems.len()
            + config
                .personalities
                .iter()
                .map(|(p, _)| systems_for(*p, ext4.is_some()).len())
                .sum::<usize>());
    let bar = if config.progress {
        let b = indicatif::ProgressBar::new(steps as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} runs  {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut t2: Vec<Table2Samples> = t2_systems
        .iter()
        .map(|s| Table2Samples {
            system: s.to_string(),
            samples: Vec::new(),
        })
        .collect();
    let mut fb: Vec<FilebenchSamples> = Vec::new();
    for rep in 0..config.reps {
        let seed = config.seed + rep as u64;
        let sizes = table2::Sizes {
            seed,
            ..config.table2
        };
        for (i, &sys) in t2_systems.iter().enumerate() {
            bar.set_message(format!("rep {}: Table 2 on {sys}", rep + 1));
            let what = format!("Table 2 on {sys}");
            let r = match sys {
                "PXFS" => {
                    let s = &config.table2;
                    let mut vol = PxfsVolume::create(
                        &config.scratch,
                        VolumeSize {
                            data_bytes: s.file_bytes
                                + (s.files + s.appends) as u64 * 8192
                                + (64 << 20),
                            inodes: s.files as u64 + 256,
                            kv_object_bytes: 4096,
                        },
                    )
                    .map_err(fs_err(what.clone()))?;
                    let r = table2::run(&mut vol, &sizes);
                    vol.destroy().map_err(fs_err(what.clone()))?;
                    r
                }
                "ext4" => {
                    let at = ext4.as_ref().expect("listed only when mounted").path();
                    kernel_run(sys, at, |k| table2::run(k, &sizes))
                }
                _ => kernel_run(sys, &config.scratch, |k| table2::run(k, &sizes)),
            };
            t2[i].samples.push(r.map_err(fs_err(what))?);
            bar.inc(1);
        }
        for &(p, params) in &config.personalities {
            let cap = if p == Personality::Webproxy {
                config.webproxy_max_file
            } else {
                0
            };
            for sys in systems_for(p, ext4.is_some()) {
                bar.set_message(format!("rep {}: {} on {sys}", rep + 1, p.name()));
                let what = format!("{} on {sys}", p.name());
                let r: pmlab_fs::Result<Run> = match sys {
                    "PXFS" | "KVFS" => {
                        let mut vol = PxfsVolume::create(
                            &config.scratch,
                            volume_for(&params, cap, sys == "KVFS"),
                        )
                        .map_err(fs_err(what.clone()))?;
                        let r = if sys == "KVFS" {
                            let kv = vol.kvfs("/kv").map_err(fs_err(what.clone()))?;
                            let max = kv.max_value() as usize;
                            let mut t = KvTarget::new(kv, max);
                            filebench::run(p, &params, cap, seed, &mut t)
                        } else {
                            let mut t = PosixTarget::new(&mut vol, params.iosize);
                            filebench::run(p, &params, cap, seed, &mut t)
                        };
                        vol.destroy().map_err(fs_err(what.clone()))?;
                        r
                    }
                    "ext4" => {
                        let at = ext4.as_ref().expect("listed only when mounted").path();
                        kernel_run(sys, at, |k| {
                            let mut t = PosixTarget::new(k, params.iosize);
                            filebench::run(p, &params, cap, seed, &mut t)
                        })
                    }
                    _ => kernel_run(sys, &config.scratch, |k| {
                        let mut t = PosixTarget::new(k, params.iosize);
                        filebench::run(p, &params, cap, seed, &mut t)
                    }),
                };
                let r = r.map_err(fs_err(what))?;
                match fb
                    .iter_mut()
                    .find(|s| s.personality == p && s.system == sys)
                {
                    Some(s) => {
                        s.samples.push(r.us_per_iteration);
                        s.counts = r.counts;
                        s.skipped = r.skipped;
                    }
                    None => fb.push(FilebenchSamples {
                        personality: p,
                        params,
                        system: sys.to_string(),
                        samples: vec![r.us_per_iteration],
                        counts: r.counts,
                        skipped: r.skipped,
                    }),
                }
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    drop(ext4);
    Ok(Measurements {
        table2: t2,
        filebench: fb,
        ext4_skipped,
    })
}
