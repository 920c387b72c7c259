//! A whole `dineroIV`-style run: counting options and the report around the tables.

use pmlab_cache::DineroArgs;
use pmlab_cache::dinero_run::run;
use pmlab_trace::{Kind, Ref, VecSource};

fn trace(n: u64) -> Vec<Ref> {
    (0..n)
        .map(|i| Ref {
            addr: (i * 40) % 8192,
            size: 4,
            kind: [Kind::Read, Kind::Write][(i % 2) as usize],
            asid: 0,
        })
        .collect()
}

fn go(flags: &str, n: u64) -> (String, u64) {
    let args = DineroArgs::parse(&flags.split_whitespace().collect::<Vec<_>>()).expect("flags");
    let mut src = VecSource::new(trace(n));
    let (mut out, mut warn) = (Vec::new(), Vec::new());
    let count = run(&args, &mut src, &mut out, &mut warn).expect("run");
    (String::from_utf8(out).unwrap(), count)
}

fn fetches(report: &str) -> u64 {
    let line = report
        .lines()
        .rfind(|l| l.starts_with(" Demand Fetches"))
        .expect("row");
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn maxcount_and_skipcount_bound_the_simulated_references() {
    let (out, n) = go(
        "-l1-usize 1k -l1-ubsize 32 -skipcount 100 -maxcount 1000",
        10_000,
    );
    assert_eq!(n, 1000);
    assert_eq!(fetches(&out), 1000);
    assert!(out.contains("---Maximum address count exceeded.\n---Simulation complete.\n"));
    assert!(out.contains("\n-skipcount 100\n-flushcount 0\n-maxcount 1000\n"));
    // Exactly maxcount references: Dinero IV never notices the limit.
    let (out, _) = go("-l1-usize 1k -l1-ubsize 32 -maxcount 1000", 1000);
    assert!(!out.contains("Maximum address count"));
}

#[test]
fn stat_interval_prints_intermediate_tables_and_flushcount_empties_the_cache() {
    let (out, _) = go("-l1-usize 1k -l1-ubsize 32 -stat-interval 1000", 3500);
    assert_eq!(
        out.matches("l1-ucache\n").count(),
        4,
        "three intervals and the end"
    );
    let plain = go("-l1-usize 16k -l1-ubsize 32", 4000).0;
    let flushed = go("-l1-usize 16k -l1-ubsize 32 -flushcount 500", 4000).0;
    let misses = |r: &str| -> u64 {
        let l = r.lines().find(|l| l.starts_with(" Demand Misses")).unwrap();
        l.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    // The 8 KiB footprint fits: one cold miss per block without flushes, eight with.
    assert_eq!(misses(&plain), 256);
    assert_eq!(misses(&flushed), 256 * 8);
}
