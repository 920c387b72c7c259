//! `pmlab reproduce aerie` end to end on a tiny configuration: PXFS, KVFS and tmpfs run
//! every personality and Table 2, the outputs are written, and every personality
//! executed exactly the flowops its FileBench definition prescribes.

use pmlab_experiments::aerie::filebench::{self, Fileset, Flowop, PosixTarget};
use pmlab_experiments::aerie::{self, Config, Counts, Personality};
use pmlab_fscheck::bench::KernelDir;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

fn scratch() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn tiny(out: &std::path::Path, scratch: &std::path::Path) -> Config {
    let mut c = Config::quick(out.to_path_buf());
    c.scratch = scratch.to_path_buf();
    c.ext4 = false;
    c.reps = 1;
    c.progress = false;
    c.table2.file_bytes = 1 << 20;
    c.table2.random_bytes = 256 << 10;
    c.table2.files = 16;
    c.table2.appends = 16;
    for (_, p) in &mut c.personalities {
        p.nfiles = 40;
        p.iterations = 12;
    }
    // One thread, and three sharing the fileset and (PXFS, KVFS) one libFS client.
    c.threads = vec![aerie::Threads::Fixed(1), aerie::Threads::Fixed(3)];
    c
}

#[test]
fn tiny_run_writes_outputs_and_counts_match_the_personalities() {
    let out = tempfile::tempdir().unwrap();
    let scr = scratch();
    let config = tiny(out.path(), scr.path());
    let report = aerie::reproduce(&config).unwrap();
    report.write(&config).unwrap();
    for f in [
        "table2.csv",
        "figure2.csv",
        "targets.csv",
        "aerie.json",
        "table2.svg",
        "figure2.svg",
    ] {
        let len = std::fs::metadata(out.path().join(f)).unwrap().len();
        assert!(len > 0, "{f} is empty");
    }
    let table2 = std::fs::read_to_string(out.path().join("table2.csv")).unwrap();
    assert_eq!(table2.lines().count(), 9, "{table2}");
    assert!(table2.contains("create") && table2.contains("rand-write"));
    let fb = &report.measurements.filebench;
    for p in Personality::ALL {
        let mut systems: Vec<&str> = fb
            .iter()
            .filter(|s| s.personality == p && s.threads == 3)
            .map(|s| s.system.as_str())
            .collect();
        systems.sort();
        let want: &[&str] = if p == Personality::Webproxy {
            &["KVFS", "PXFS", "tmpfs"]
        } else {
            &["PXFS", "tmpfs"]
        };
        assert_eq!(systems, want, "{}", p.name());
    }
    assert_eq!(fb.len(), 2 * 9, "every system at both thread counts");
    for s in fb {
        // Threads split the iterations: together they run each flowop as often as one.
        assert_eq!(
            s.counts,
            Counts::expected(s.personality, 12),
            "{} on {} with {} threads",
            s.personality.name(),
            s.system,
            s.threads
        );
        assert_eq!(s.skipped, 0);
        assert!(s.samples.iter().all(|&x| x > 0.0));
        // The threads share one libFS client, so no lease of theirs can conflict with
        // another's: nothing is revoked (a client per thread revokes the log file's
        // lease back and forth on webserver, and directory leases on the others).
        if s.system != "tmpfs" {
            assert!(
                s.revocations_per_iteration.iter().all(|&r| r == 0.0),
                "{} x{} on {}: {:?} revocations per iteration",
                s.personality.name(),
                s.threads,
                s.system,
                s.revocations_per_iteration
            );
        }
    }
    // Webproxy: 1 delete, 1 create, 1 append, 5 open/read, 6 close per iteration.
    let wp = Counts::expected(Personality::Webproxy, 1);
    assert_eq!(
        [
            wp.of(Flowop::DeleteFile),
            wp.of(Flowop::CreateFile),
            wp.of(Flowop::AppendFileRand),
            wp.of(Flowop::OpenFile),
            wp.of(Flowop::ReadWholeFile),
            wp.of(Flowop::CloseFile),
        ],
        [1, 1, 1, 5, 5, 6]
    );
    // KVFS on webproxy and three personalities, at both thread counts; eight Table 2 rows.
    assert_eq!(report.targets.len(), 2 + 3 * 2 + 8);
    // Each target's ratio repetition by repetition, from the same samples as its medians.
    for t in &report.targets {
        assert_eq!(t.per_repetition.len(), config.reps, "{}", t.target);
    }
    let kv = |sys| report.filebench_samples(Personality::Webproxy, sys, 1)[0];
    assert_eq!(
        report.targets[0].per_repetition[0],
        kv("tmpfs") / kv("KVFS")
    );
    let text = report.to_string();
    assert!(text.contains("Table 2") && text.contains("Figure 2") && text.contains("webproxy"));
}

#[test]
fn fileset_paths_are_unique_and_sizes_follow_the_mean() {
    let mut p = Personality::Fileserver.paper();
    p.nfiles = 10_000;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let set = Fileset::new("/fb", &p, 0, &mut rng);
    let unique: std::collections::HashSet<_> = set.paths.iter().collect();
    assert_eq!(unique.len(), 10_000);
    // Width 20 and 10,000 files: three levels, 500 leaf directories under 25 top ones.
    assert_eq!(set.paths[9_999], "/fb/d24/d19/f19");
    assert_eq!(set.dirs.len(), 1 + 25 + 500);
    let mean = set.sizes.iter().sum::<u64>() as f64 / set.sizes.len() as f64;
    let want = p.meanfilesize as f64;
    assert!((mean - want).abs() < 0.05 * want, "mean {mean} vs {want}");
    assert_eq!(set.existing().len(), 8_000);
    // A fileset shallower than one full directory still names every file apart.
    p.nfiles = 40;
    let small = Fileset::new("/fb", &p, 0, &mut rng);
    let unique: std::collections::HashSet<_> = small.paths.iter().collect();
    assert_eq!(unique.len(), 40);
    assert_eq!(small.paths[39], "/fb/f39");
}

#[test]
fn personality_on_tmpfs_leaves_the_fileset_consistent() {
    // After varmail, the files the fileset says exist are exactly those on disk.
    let scr = scratch();
    let mut k = KernelDir::new("tmpfs", scr.path());
    let mut p = Personality::Varmail.paper();
    p.nfiles = 30;
    p.iterations = 20;
    let mut t = PosixTarget::new(&mut k, p.iosize);
    let r = filebench::run(Personality::Varmail, &p, 0, 3, &mut [&mut t]).unwrap();
    assert_eq!(r.counts, Counts::expected(Personality::Varmail, 20));
    let on_disk = std::fs::read_dir(scr.path().join("fb")).unwrap().count();
    // Each iteration deletes one file and creates one: the population is unchanged.
    assert_eq!(on_disk, 30 * 80 / 100);
}

#[test]
fn kvfs_objects_carved_from_one_reservation_stay_apart() {
    // More puts than one reservation of extents holds: every value must come back intact.
    use pmlab_fscheck::bench::{PxfsVolume, VolumeSize};
    let scr = scratch();
    let n = 3 * pmlab_fs::kvfs::EXTENTS_PER_RESERVE as usize + 5;
    let vol = PxfsVolume::create(
        scr.path(),
        VolumeSize {
            data_bytes: 16 << 20,
            // One inode per object, and some to spare.
            inodes: n as u64 + 64,
            kv_object_bytes: 8192,
        },
    )
    .unwrap();
    let kv = vol.kvfs("/kv").unwrap();
    let value = |k: usize| vec![k as u8; 8192 - k];
    for k in 0..n {
        kv.put(&format!("k{k}"), &value(k)).unwrap();
    }
    kv.sync().unwrap();
    for k in 0..n {
        assert_eq!(
            kv.get(&format!("k{k}")).unwrap().unwrap(),
            value(k),
            "key k{k}"
        );
    }
    // Replacing values takes fresh extents from the pool, never one still in use.
    for k in (0..n).step_by(3) {
        kv.put(&format!("k{k}"), &value(k + 1)).unwrap();
    }
    for k in 0..n {
        let want = if k % 3 == 0 { value(k + 1) } else { value(k) };
        assert_eq!(kv.get(&format!("k{k}")).unwrap().unwrap(), want, "key k{k}");
    }
}
