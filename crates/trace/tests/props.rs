//! Property tests: writers and readers round-trip, and the interleaver keeps each
//! process's order and quantum. (Readers meeting hostile input: `fuzz.rs`.)

use std::io::Read;

use pmlab_trace::{
    BinaryReader, BinaryWriter, DinReader, DinWriter, Format, Interleave, Kind, Ref, RefSource,
    SwitchUnit, TraceError, VecSource, create_trace_writer, open_trace, read_all,
    trace_from_reader,
};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Read),
        Just(Kind::Write),
        Just(Kind::Instr),
        Just(Kind::Misc)
    ]
}

fn reference(with_pid: bool) -> impl Strategy<Value = Ref> {
    (any::<u64>(), 1u32.., kind(), any::<u16>()).prop_map(move |(addr, size, kind, asid)| Ref {
        addr,
        size,
        kind,
        asid: if with_pid { asid } else { 0 },
    })
}

/// Drains a source with a small batch, so batch boundaries fall everywhere.
fn drain(src: &mut dyn RefSource, batch: usize) -> Result<Vec<Ref>, TraceError> {
    let mut all = Vec::new();
    let mut buf = Vec::with_capacity(batch);
    while src.next_batch(&mut buf)? > 0 {
        assert!(buf.len() <= batch.max(1));
        all.extend_from_slice(&buf);
    }
    Ok(all)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn binary_round_trips(refs in prop::collection::vec(reference(true), 0..300), batch in 1usize..50) {
        let mut w = BinaryWriter::new(Vec::new()).unwrap();
        w.write_refs(&refs).unwrap();
        let bytes = w.into_inner().unwrap();
        prop_assert_eq!(bytes.len(), 16 + 16 * refs.len());
        prop_assert_eq!(drain(&mut BinaryReader::new(&bytes[..], "b"), batch).unwrap(), refs);
    }

    #[test]
    fn din_round_trips(refs in prop::collection::vec(reference(false), 0..300), batch in 1usize..50) {
        let mut w = DinWriter::new(Vec::new());
        w.write_refs(&refs).unwrap();
        let bytes = w.into_inner().unwrap();
        prop_assert_eq!(drain(&mut DinReader::extended(&bytes[..], "d"), batch).unwrap(), refs);
    }

    #[test]
    fn interleave_keeps_order_and_quantum(
        procs in prop::collection::vec(prop::collection::vec(kind(), 0..200), 1..5),
        quantum in 1u64..20,
    ) {
        // Each process's references carry (process, sequence) in the address.
        let traces: Vec<Vec<Ref>> = procs.iter().enumerate().map(|(p, kinds)| {
            kinds.iter().enumerate().map(|(i, &kind)| Ref { addr: ((p as u64) << 32) | i as u64, size: 1, kind, asid: 999 }).collect()
        }).collect();
        let mut il = Interleave::new(quantum, SwitchUnit::Instructions);
        for (p, t) in traces.iter().enumerate() {
            il.add(10 + p as u16, Box::new(VecSource::new(t.clone())));
        }
        let merged = drain(&mut il, 13).unwrap();
        prop_assert_eq!(merged.len(), traces.iter().map(Vec::len).sum::<usize>());
        // Order within each process is preserved and asids are stamped.
        for (p, t) in traces.iter().enumerate() {
            let mine: Vec<u64> = merged.iter().filter(|r| r.asid == 10 + p as u16).map(|r| r.addr).collect();
            let want: Vec<u64> = t.iter().map(|r| r.addr).collect();
            prop_assert_eq!(mine, want);
        }
        // Every run but a process's last holds a whole number of quanta (exactly one
        // while another process is live to switch to).
        let mut runs: Vec<(u16, u64)> = Vec::new();
        for r in &merged {
            let instr = (r.kind == Kind::Instr) as u64;
            match runs.last_mut() {
                Some((asid, n)) if *asid == r.asid => *n += instr,
                _ => runs.push((r.asid, instr)),
            }
        }
        for (i, &(asid, n)) in runs.iter().enumerate() {
            let last_of_pid = !runs[i + 1..].iter().any(|&(p, _)| p == asid);
            if !last_of_pid {
                prop_assert_eq!(n, quantum, "run {} of asid {}", i, asid);
            } else {
                prop_assert!(n <= quantum || runs[i + 1..].is_empty());
            }
        }
        // Ends are reported at the position just after each process's last reference.
        for end in il.ended() {
            let last = merged.iter().rposition(|r| r.asid == end.asid).map_or(0, |i| i as u64 + 1);
            prop_assert!(end.at_ref >= last);
            prop_assert!(merged[last as usize..end.at_ref as usize].iter().all(|r| r.asid != end.asid));
        }
        prop_assert_eq!(il.ended().len(), procs.len());
    }
}

#[test]
fn compressed_files_round_trip_through_detection() {
    let dir = tempfile::tempdir().unwrap();
    let refs: Vec<Ref> = (0..10_000u64)
        .map(|i| Ref {
            addr: i * 64,
            size: 8,
            kind: Kind::ALL[(i % 4) as usize],
            asid: (i % 3) as u16,
        })
        .collect();
    for (name, format) in [
        ("t.bin", Format::Binary),
        ("t.bin.zst", Format::Binary),
        ("t.bin.xz", Format::Binary),
        ("t.din.zst", Format::DinExtended),
        ("t.din.xz", Format::DinExtended),
    ] {
        let path = dir.path().join(name);
        let path = path.to_str().unwrap();
        let mut w = create_trace_writer(path, format, 3).unwrap();
        w.write_refs(&refs).unwrap();
        w.finish().unwrap();
        let got = read_all(&mut open_trace(path, None).unwrap()).unwrap();
        let want: Vec<Ref> = if format == Format::Binary {
            refs.clone()
        } else {
            refs.iter().map(|r| Ref { asid: 0, ..*r }).collect()
        };
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn unreadable_and_unrecognised_inputs_are_errors() {
    let e = open_trace("/nonexistent/trace.bin", None).err().unwrap();
    assert!(e.to_string().contains("/nonexistent/trace.bin"), "{e}");
    let owned: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(b"hello world\n".to_vec()));
    let e = trace_from_reader(owned, "h.txt", None).err().unwrap();
    assert!(matches!(e, TraceError::Format { .. }), "{e}");
}
