//! Shared helpers of the integration tests: the validation set and a din reader.

#![allow(dead_code)]

use pmlab_trace::{Format, Ref};
use std::path::PathBuf;

/// The repository's `data/validation/dinero`, located from this crate.
pub fn validation_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/validation/dinero")
}

/// Reads a validation trace with the trace crate's reader (xz, extended din).
pub fn load_trace(name: &str) -> Vec<Ref> {
    let path = validation_dir()
        .join("traces")
        .join(format!("{name}.din.xz"));
    let mut src = pmlab_trace::open_trace(
        path.to_str().expect("utf-8 path"),
        Some(Format::DinExtended),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    pmlab_trace::read_all(&mut *src).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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
