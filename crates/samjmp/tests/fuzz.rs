//! Fuzz suites (proptest; 256 cases by default, `PROPTEST_CASES=100000` in
//! `scripts/fuzz-long.sh`):
//!
//! * hostile SAM text: real records with bytes replaced, inserted or removed, tabs
//!   added or dropped, and lines of random bytes; loading gives the records or an
//!   error naming the damaged line (and a field), never a panic;
//! * damaged BAM: bytes of a real BAM flipped: records or an error, never a panic;
//! * a damaged structure: a real loaded, sorted, indexed and viewed region file with
//!   bytes flipped and 8-byte words overwritten (references, lengths, counts):
//!   opening it and running the checker and every operation give results or an
//!   error naming the item and field, never a panic or a fault (a wild reference
//!   followed would be a SIGSEGV, which kills the suite).

use std::path::{Path, PathBuf};

use pmlab_samjmp::arena::{Arena, Offsets};
use pmlab_samjmp::ingest::load;
use pmlab_samjmp::ops::{Op, Target, load_into, print_records, run_on};
use pmlab_samjmp::store::Scratch;
use pmlab_samjmp::{Place, SamError, check, flagstat, index, sort};
use proptest::prelude::*;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/sam")
        .join(name)
}

fn toy_lines() -> Vec<Vec<u8>> {
    std::fs::read(data("toy.sam"))
        .unwrap()
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| l.to_vec())
        .collect()
}

/// One change to a line.
#[derive(Clone, Debug)]
enum Edit {
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let byte = prop_oneof![
        Just(b'\t'),
        Just(b'*'),
        Just(b'='),
        Just(b':'),
        Just(b'-'),
        Just(b'0'),
        Just(b'9'),
        Just(0u8),
        Just(0xff),
        any::<u8>()
    ];
    prop_oneof![
        (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Set(i, b)),
        (any::<usize>(), byte).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Remove),
    ]
}

fn apply(line: &mut Vec<u8>, e: &Edit) {
    match *e {
        Edit::Set(i, b) if !line.is_empty() => {
            let n = line.len();
            line[i % n] = if b == b'\n' { b'\t' } else { b };
        }
        Edit::Insert(i, b) => line.insert(i % (line.len() + 1), if b == b'\n' { b' ' } else { b }),
        Edit::Remove(i) if !line.is_empty() => {
            let n = line.len();
            line.remove(i % n);
        }
        _ => {}
    }
}

fn load_bytes(bytes: &[u8], name: &str) -> Result<u64, SamError> {
    let d = tempfile::Builder::new()
        .prefix("pmlab-sam-fuzz")
        .tempdir_in("/dev/shm")
        .unwrap();
    let p = d.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    let mut s = Scratch::new(16 << 20).unwrap();
    load(&mut s.arena, &p, false).map(|st| st.records)
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    #[test]
    fn hostile_sam_lines_are_located_errors(
        which in 2usize..12,
        edits in prop::collection::vec(edit(), 1..8),
        random_line in prop::option::weighted(0.2, prop::collection::vec(any::<u8>(), 0..200)),
    ) {
        let mut lines = toy_lines();
        let which = which.min(lines.len() - 1);
        match random_line {
            Some(r) => lines[which] = r.into_iter().map(|b| if b == b'\n' { b'\t' } else { b }).collect(),
            None => edits.iter().for_each(|e| apply(&mut lines[which], e)),
        }
        // A damaged record line must not turn into a header line: keep it a record.
        if lines[which].first() == Some(&b'@') {
            lines[which][0] = b'r';
        }
        let text: Vec<u8> = lines.join(&b'\n').into_iter().chain([b'\n']).collect();
        match load_bytes(&text, "f.sam") {
            Ok(n) => prop_assert_eq!(n as usize, lines.len() - 2),
            Err(SamError::Record { place, field, .. }) => {
                prop_assert_eq!(place, Place::Line(which as u64 + 1));
                prop_assert!(!field.is_empty());
            }
            Err(e) => prop_assert!(false, "unlocated error: {e}"),
        }
    }

    #[test]
    fn damaged_bam_is_an_error_not_a_panic(
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let mut bam = std::fs::read(data("fetch_pairs.bam")).unwrap();
        let n = bam.len();
        for (i, b) in flips {
            bam[i % n] ^= b | 1;
        }
        match load_bytes(&bam, "f.bam") {
            Ok(_) | Err(SamError::Bam { .. }) | Err(SamError::Record { .. })
            | Err(SamError::Header { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected error: {e}"),
        }
    }
}

/// A real region file: ex1 loaded, sorted both ways, indexed, counted and viewed.
fn real_region() -> Vec<u64> {
    let d = tempfile::Builder::new()
        .prefix("pmlab-sam-fuzz")
        .tempdir_in("/dev/shm")
        .unwrap();
    let p = d.path().join("ex1.region");
    let t = Target::Region(p.clone());
    load_into(
        &t,
        &data("ex1.bam"),
        Some(2 << 20),
        pmlab_vas::Mode(0o600),
        false,
    )
    .unwrap();
    for op in [
        Op::Sort {
            by_name: true,
            print: false,
        },
        Op::Sort {
            by_name: false,
            print: false,
        },
        Op::Index,
        Op::Flagstat,
        Op::View {
            region: "seq1:100-900".into(),
            count: true,
        },
    ] {
        pmlab_samjmp::ops::run(&t, &op, &mut std::io::sink()).unwrap();
    }
    let bytes = std::fs::read(&p).unwrap();
    bytes
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn used_words(words: &[u64]) -> usize {
    // Root: magic, complete, size, used.
    (words[3] as usize / 8).min(words.len())
}

/// Every operation on a (possibly damaged) structure; errors are fine, panics not.
fn exercise(words: &mut [u64]) -> Result<(), SamError> {
    let size = (words.len() * 8) as u64;
    let base = words.as_mut_ptr().cast::<u8>();
    // SAFETY: `words` is 8-aligned, read-write and outlives the arena.
    let mut a: Arena<Offsets> = unsafe { Arena::new(Offsets { base }, base, size) };
    a.set_label("fuzzed region");
    a.validate("fuzzed region")?;
    let _ = check::check(&a);
    let _ = flagstat::counts(&a);
    let _ = sort::sorted(&a, false);
    let _ = sort::sorted(&a, true);
    let _ = index::build(&a);
    if let Ok(names) = a.ref_names() {
        for r in ["seq1", "seq2:1000-1500", "seq1:1-1"] {
            if let Ok(reg) = index::parse_region(r, &names) {
                if let Ok(sel) = index::select(&a, reg) {
                    let _ = print_records(&a, &sel, "last_view", &mut std::io::sink());
                }
            }
        }
    }
    if let Ok(Some(o)) = a.order(true) {
        let o = o.to_vec();
        let _ = print_records(&a, &o, "by_name", &mut std::io::sink());
    }
    let _ = a.selection();
    // And the operations that write, on the damaged structure.
    for op in [
        Op::Flagstat,
        Op::Sort {
            by_name: false,
            print: true,
        },
        Op::Index,
    ] {
        let _ = run_on(&mut a, &op, &mut std::io::sink());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    #[test]
    fn a_damaged_structure_is_an_error_not_a_fault(
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        words in prop::collection::vec((any::<usize>(), prop_oneof![
            any::<u64>(),
            (0u64..1 << 21),
            Just(0u64),
            Just(u64::MAX),
            (0u64..64).prop_map(|k| 1u64 << k),
        ]), 0..4),
    ) {
        static REAL: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
        let mut w = REAL.get_or_init(real_region).clone();
        let used = used_words(&w);
        for (i, v) in words {
            w[i % used] = v;
        }
        for (i, b) in flips {
            let at = i % (used * 8);
            w[at / 8] ^= u64::from(b | 1) << (8 * (at % 8));
        }
        match exercise(&mut w) {
            Ok(()) | Err(SamError::Format { .. }) | Err(SamError::Corrupt { .. })
            | Err(SamError::Needs(_)) | Err(SamError::Region { .. }) | Err(SamError::Full { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected error: {e}"),
        }
    }
}

#[test]
fn damaged_references_are_named_by_item_and_field() {
    let mut w = real_region();
    // The first record's QNAME reference (the record table's first entry names it).
    let records = w[9] as usize / 8; // root.records
    let first = w[records] as usize / 8;
    w[first] = u64::MAX - 3;
    let size = (w.len() * 8) as u64;
    let base = w.as_mut_ptr().cast::<u8>();
    // SAFETY: as in `exercise`.
    let a: Arena<Offsets> = unsafe { Arena::new(Offsets { base }, base, size) };
    let e = flagstat::counts(&a).unwrap_err().to_string();
    assert!(e.contains("record 1") && e.contains("field QNAME"), "{e}");
}
