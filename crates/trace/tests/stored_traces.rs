//! The recorded traces under data/traces: each decodes in full, is one process, and has
//! the footprint its README states (hundreds of KiB to MiB).

use pmlab_trace::{Interleave, Kind, SwitchUnit, TraceInfo, open_trace};

const TRACES: [(&str, u64); 6] = [
    ("cc1", 628),
    ("xz", 1129),
    ("sort", 466),
    ("awk", 148),
    ("perl", 189),
    ("diff", 524),
];

fn path(name: &str) -> String {
    format!(
        "{}/../../data/traces/{name}.bin.zst",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn each_stored_trace_matches_its_readme() {
    for (name, pages) in TRACES {
        let info = TraceInfo::gather(&mut open_trace(&path(name), None).unwrap()).unwrap();
        assert_eq!(info.refs, 5_000_000, "{name}");
        assert_eq!(info.pages(), pages, "{name}");
        assert_eq!(info.by_asid.len(), 1, "{name}");
        assert!(info.count(Kind::Instr) > info.refs / 2, "{name}");
    }
}

#[test]
fn interleaving_the_set_keeps_every_reference() {
    let mut mult = Interleave::new(Interleave::MULT2_2, SwitchUnit::Instructions);
    for (asid, (name, _)) in TRACES.iter().enumerate() {
        mult.add(asid as u16, open_trace(&path(name), None).unwrap());
    }
    let info = TraceInfo::gather(&mut mult).unwrap();
    assert_eq!(info.refs, 30_000_000);
    assert_eq!(info.by_asid.len(), 6);
    assert_eq!(info.pages(), TRACES.iter().map(|t| t.1).sum::<u64>());
    assert_eq!(mult.ended().len(), 6);
    assert!(mult.switches() > 6 * 3_300_000 / Interleave::MULT2_2 - 6);
}
