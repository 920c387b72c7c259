//! Volume metadata meets damage: bytes of a populated metadata space (directories,
//! files, KVFS objects, links, a used redo log) are overwritten, sometimes with the page
//! checksum fixed up afterwards (a hostile writer can reseal what it damages). Reading the
//! superblock, the service's recovery (replaying the log) and fsck must each end in a
//! result or an error naming the page and byte, never panic, and never allocate more
//! than a bound (cases: `PROPTEST_CASES`, default 256).

use std::sync::OnceLock;

use pmlab_fs::error::FsError;
use pmlab_fs::fsck::fsck;
use pmlab_fs::layout::Superblock;
use pmlab_fs::media::{BODY, PAGE, Tag, seal};
use pmlab_fs::redo;
use pmlab_spine::VecMemory;
use pmlab_testkit::alloc::{Counting, peak_during};
use pmlab_testkit::fuzz_config;
use proptest::prelude::*;

#[global_allocator]
static ALLOC: Counting = Counting;

/// The undamaged image, built once.
fn image() -> &'static [u8] {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| pmlab_fscheck::crashtest::populated_image(5, 12).expect("a volume"))
}

/// Reseals page `pno` of `bytes` with the tag its trailer names (if it names one).
fn reseal(bytes: &mut [u8], pno: usize) {
    let page: &mut [u8; PAGE as usize] = (&mut bytes[pno * PAGE as usize..][..PAGE as usize])
        .try_into()
        .unwrap();
    let tag = u32::from_le_bytes(page[BODY + 4..].try_into().unwrap());
    if let Some(tag) = Tag::from_u32(tag) {
        seal(page, tag);
    }
}

/// An error of reading damaged metadata must say where the damage is.
fn located(e: &FsError) -> bool {
    match e {
        FsError::Corrupt { .. } => e.to_string().contains("page "),
        FsError::Foreign(_) => true,
        FsError::Memory(_) => true,
        _ => false,
    }
}

fn check(bytes: Vec<u8>) -> Result<(), TestCaseError> {
    let mut mem = VecMemory::new(bytes.len());
    pmlab_spine::Memory::write(&mut mem, 0, &bytes).unwrap();
    let (outcome, peak) = peak_during(|| -> Result<(), FsError> {
        let sb = Superblock::read(&mut mem)?;
        redo::recover(&mut mem, &sb)?;
        let report = fsck(&mut mem)?;
        for f in &report.findings {
            assert!(!f.place.is_empty(), "a finding without a place: {f}");
        }
        Ok(())
    });
    if let Err(e) = outcome {
        prop_assert!(located(&e), "{}", e);
    }
    // The image is a few MiB; checking it may hold a few copies of what it reads.
    prop_assert!(
        peak < 8 * bytes.len() + (16 << 20),
        "allocated {} bytes",
        peak
    );
    Ok(())
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn damaged_metadata(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        resealed in any::<bool>(),
        near_used in any::<bool>(),
    ) {
        let mut bytes = image().to_vec();
        // Half the time aim at the first pages, where the superblock, tables, bitmaps,
        // the root and the log live; otherwise anywhere.
        let span = if near_used { bytes.len().min(96 * PAGE as usize) } else { bytes.len() };
        let mut pages = Vec::new();
        for (at, b) in &edits {
            let i = at.index(span);
            bytes[i] = *b;
            pages.push(i / PAGE as usize);
        }
        if resealed {
            for p in pages {
                reseal(&mut bytes, p);
            }
        }
        check(bytes)?;
    }
}

/// The same checks pass the undamaged image: the suite sees a clean volume as clean.
#[test]
fn the_undamaged_image_is_clean() {
    let mut mem = VecMemory::new(image().len());
    pmlab_spine::Memory::write(&mut mem, 0, image()).unwrap();
    let sb = Superblock::read(&mut mem).unwrap();
    redo::recover(&mut mem, &sb).unwrap();
    let report = fsck(&mut mem).unwrap();
    assert!(
        report.clean() && report.summary.files > 0,
        "{:?}",
        report.findings
    );
}

/// Found by the long run: a domain's reserved page 0 cleared in its data bitmap (with the
/// bitmap page resealed) made fsck look up an owner the page never has, and panic.
#[test]
fn a_cleared_reserved_data_bit_is_a_finding() {
    let mut bytes = image().to_vec();
    let mut mem = VecMemory::new(bytes.len());
    pmlab_spine::Memory::write(&mut mem, 0, &bytes).unwrap();
    let sb = Superblock::read(&mut mem).unwrap();
    let page = sb.dbitmap_of(0) as usize;
    bytes[page * PAGE as usize] &= !1;
    reseal(&mut bytes, page);
    pmlab_spine::Memory::write(&mut mem, 0, &bytes).unwrap();
    let report = fsck(&mut mem).unwrap();
    assert!(
        report
            .findings
            .iter()
            .any(|f| f.place == "domain 0 data page 0" && f.what.contains("reserved")),
        "{:?}",
        report.findings
    );
}
