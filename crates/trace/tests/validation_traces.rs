//! The readers against the Dinero IV validation traces the repository carries
//! (`data/validation/dinero`).

use pmlab_trace::{Format, Kind, RefSource, open_trace};

fn validation(rel: &str) -> String {
    format!(
        "{}/../../data/validation/dinero/{rel}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn reads_xz_compressed_extended_din_by_detection() {
    let path = validation("traces/sort.din.xz");
    let mut src = open_trace(&path, None).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut buf = Vec::with_capacity(8192);
    let (mut total, mut instr) = (0u64, 0u64);
    let mut first = None;
    while src.next_batch(&mut buf).unwrap() > 0 {
        first.get_or_insert(buf[0]);
        total += buf.len() as u64;
        instr += buf.iter().filter(|r| r.kind == Kind::Instr).count() as u64;
    }
    let first = first.unwrap();
    assert_eq!(
        (first.addr, first.size, first.kind),
        (0x111a10, 4, Kind::Instr)
    );
    assert!(total > 1_000_000, "{total}");
    assert!(instr > 0 && instr < total);
    // Naming the format explicitly gives the same stream.
    let mut explicit = open_trace(&path, Some(Format::DinExtended)).unwrap();
    let mut n = 0u64;
    while explicit.next_batch(&mut buf).unwrap() > 0 {
        n += buf.len() as u64;
    }
    assert_eq!(n, total);
}
