//! Reader throughput over in-memory traces, in references per second:
//! `cargo bench -p pmlab-trace --bench readers`. The simulators target more than
//! 120 M refs/s from the binary format and 36 M refs/s from din text.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
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

/// Reads `src` to the end; returns the count and a sum of the addresses, so that the
/// reading cannot be optimised away.
fn drain(src: &mut dyn RefSource) -> (u64, u64) {
    let mut buf = Vec::with_capacity(4096);
    let (mut n, mut sum) = (0u64, 0u64);
    while src.next_batch(&mut buf).expect("a valid trace") > 0 {
        n += buf.len() as u64;
        sum = buf.iter().fold(sum, |s, r| s.wrapping_add(r.addr));
    }
    (n, sum)
}

/// The same references in the three formats.
fn encodings(refs: &[Ref]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let mut bw = BinaryWriter::new(Vec::new()).unwrap();
    bw.write_refs(refs).unwrap();
    let mut dw = DinWriter::new(Vec::new());
    dw.write_refs(refs).unwrap();
    let mut lackey = Vec::new();
    for r in refs {
        let tag = match r.kind {
            Kind::Instr => "I ",
            Kind::Read | Kind::Misc => " L",
            Kind::Write => " S",
        };
        lackey.extend_from_slice(format!("{tag} {:08x},{}\n", r.addr, r.size).as_bytes());
    }
    (bw.into_inner().unwrap(), dw.into_inner().unwrap(), lackey)
}

fn readers(c: &mut Criterion) {
    let n = 1_000_000;
    let (bin, din, lackey) = encodings(&synthetic(n));
    let mut g = c.benchmark_group("readers");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("binary", |b| {
        b.iter(|| drain(&mut BinaryReader::new(&bin[..], "bin")))
    });
    g.bench_function("din", |b| {
        b.iter(|| drain(&mut DinReader::extended(&din[..], "din")))
    });
    g.bench_function("lackey", |b| {
        b.iter(|| drain(&mut LackeyReader::new(&lackey[..], "lackey")))
    });
    g.finish();
}

criterion_group!(benches, readers);
criterion_main!(benches);
