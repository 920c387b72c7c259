//! Shared helpers of the integration tests: the validation set and a din reader.

#![allow(dead_code)]

use pmlab_trace::{Kind, Ref};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

/// `/work/shared/validation/dinero`, located from this crate.
pub fn validation_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/validation/dinero")
}

/// Reads an extended-din (`D`) text trace: `r|w|i|m|0-3 HEXADDR HEXSIZE`.
pub fn parse_din(reader: impl Read) -> Vec<Ref> {
    let mut out = Vec::new();
    for (n, line) in BufReader::new(reader).lines().enumerate() {
        let line = line.expect("read trace");
        let mut f = line.split_whitespace();
        let Some(k) = f.next() else { continue };
        let kind = match k {
            "r" | "0" => Kind::Read,
            "w" | "1" => Kind::Write,
            "i" | "2" => Kind::Instr,
            "m" | "3" => Kind::Misc,
            other => panic!("line {}: bad kind {other}", n + 1),
        };
        let addr = u64::from_str_radix(f.next().expect("address"), 16).expect("hex address");
        let size = f
            .next()
            .map_or(4, |s| u32::from_str_radix(s, 16).expect("hex size"));
        out.push(Ref {
            addr,
            size,
            kind,
            pid: 0,
        });
    }
    out
}

/// Decompresses and parses a validation trace.
pub fn load_trace(name: &str) -> Vec<Ref> {
    let path = validation_dir()
        .join("traces")
        .join(format!("{name}.din.xz"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_din(xz2::read::XzDecoder::new(file))
}

/// The configurations: (name, flags).
pub fn configs() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(validation_dir().join("configs.txt")).expect("configs.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, flags) = l.split_once('\t').expect("name<TAB>flags");
            (
                name.to_string(),
                flags.split_whitespace().map(String::from).collect(),
            )
        })
        .collect()
}
