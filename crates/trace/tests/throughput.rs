//! Reader throughput over in-memory traces (no timing assertions: the figures are
//! printed; run with `cargo test --release -p pmlab-trace --test throughput -- --nocapture`).
//! The simulators target more than 120 M refs/s from the binary format and 36 M refs/s
//! from din text.

use std::time::Instant;

use pmlab_trace::{
    BinaryReader, BinaryWriter, DinReader, DinWriter, Kind, LackeyReader, Ref, RefSource,
};

/// A program-like stream: sequential fetches with interleaved data references.
fn synthetic(n: usize) -> Vec<Ref> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let kind = [Kind::Instr, Kind::Instr, Kind::Read, Kind::Write][(state & 3) as usize];
            let addr = if kind == Kind::Instr {
                0x400000 + 4 * i as u64
            } else {
                0x7ff0_0000 + (state >> 40)
            };
            Ref {
                addr,
                size: 1 << (state >> 61 & 3),
                kind,
                asid: 0,
            }
        })
        .collect()
}

/// CPU time of the calling thread in seconds (Linux `schedstat`), which unlike wall time
/// does not count waiting for a processor on a busy machine.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// Reads `src` to the end and prints the rate; returns the count.
fn measure(label: &str, src: &mut dyn RefSource) -> u64 {
    let mut buf = Vec::with_capacity(4096);
    let cpu_start = thread_cpu_seconds();
    let start = Instant::now();
    let (mut n, mut sum) = (0u64, 0u64);
    while src.next_batch(&mut buf).unwrap() > 0 {
        n += buf.len() as u64;
        sum = buf.iter().fold(sum, |s, r| s.wrapping_add(r.addr));
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = match (cpu_start, thread_cpu_seconds()) {
        (Some(a), Some(b)) => format!(", {:.1} M refs/s of CPU time", n as f64 / (b - a) / 1e6),
        _ => String::new(),
    };
    println!(
        "{label:>8}: {n} refs in {secs:.3} s = {:.1} M refs/s wall{cpu} (sum {sum:x})",
        n as f64 / secs / 1e6
    );
    n
}

#[test]
fn reader_throughput() {
    let n = 4_000_000;
    let refs = synthetic(n);
    let mut bw = BinaryWriter::new(Vec::new()).unwrap();
    bw.write_refs(&refs).unwrap();
    let bin = bw.into_inner().unwrap();
    let mut dw = DinWriter::new(Vec::new());
    dw.write_refs(&refs).unwrap();
    let din = dw.into_inner().unwrap();
    let mut lackey = Vec::new();
    for r in &refs {
        let tag = match r.kind {
            Kind::Instr => "I ",
            Kind::Read | Kind::Misc => " L",
            Kind::Write => " S",
        };
        lackey.extend_from_slice(format!("{tag} {:08x},{}\n", r.addr, r.size).as_bytes());
    }
    assert_eq!(
        measure("binary", &mut BinaryReader::new(&bin[..], "bin")),
        n as u64
    );
    assert_eq!(
        measure("din D", &mut DinReader::extended(&din[..], "din")),
        n as u64
    );
    assert_eq!(
        measure("lackey", &mut LackeyReader::new(&lackey[..], "lackey")),
        n as u64
    );
}
