//! The store in one process and across processes: GET/SET against a reference map,
//! rehashing, the checker, finding the store again by name, bad segments.

use std::collections::BTreeMap;
use std::path::Path;

use pmlab_kvjmp::{KvError, KvStore};
use pmlab_testkit::child;
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{Mode, SpaceJmp};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("pmlab-kv-test")
        .tempdir_in("/dev/shm")
        .unwrap()
}

/// Runs `body` in a child process of this test: segments sit at fixed addresses that
/// the tests' registries share, so each test maps them in a process of its own.
fn alone(test: &str, body: impl FnOnce()) {
    child::branch(|_| body());
    let out = child::command(test, "alone").output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sets_and_gets_match_a_reference_map_through_several_rehashes() {
    alone(
        "sets_and_gets_match_a_reference_map_through_several_rehashes",
        sets_and_gets,
    );
}

fn sets_and_gets() {
    let dir = scratch();
    let mut s = KvStore::create(dir.path(), "t", 16 << 20, Mode(0o600), 7).unwrap();
    let mut reference = BTreeMap::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut expanded = 0;
    for i in 0..3000u32 {
        let k = format!("key:{:012}", rng.gen_range(0..1500u32)).into_bytes();
        let v = format!(
            "v{}",
            "x".repeat(rng.gen_range(0..40usize) + (i % 3) as usize)
        )
        .into_bytes();
        let e = s.set(&k, &v).unwrap();
        expanded += u32::from(e.expanded);
        reference.insert(k.clone(), v);
        if i % 7 == 0 {
            let probe = format!("key:{:012}", rng.gen_range(0..1600u32)).into_bytes();
            assert_eq!(s.get(&probe).unwrap().as_ref(), reference.get(&probe));
        }
    }
    assert!(expanded >= 8, "{expanded} expansions");
    let report = s.check().unwrap();
    assert_eq!(report.contents, reference);
    assert_eq!(report.sets, 3000);
    for (k, v) in &reference {
        assert_eq!(s.get(k).unwrap().as_ref(), Some(v));
    }
}

#[test]
fn the_store_is_found_again_by_name_after_every_process_exits() {
    child::branch(|role| {
        let dir = std::env::var("KV_DIR").unwrap();
        let dir = Path::new(&dir);
        match role {
            "create" => {
                let mut s = KvStore::create(dir, "kept", 8 << 20, Mode(0o600), 3).unwrap();
                for i in 0..500 {
                    s.set(format!("k{i}").as_bytes(), format!("v{i}").as_bytes())
                        .unwrap();
                }
            }
            _ => {
                let mut s = KvStore::open(dir, "kept", false).unwrap();
                for i in 0..500 {
                    assert_eq!(
                        s.get(format!("k{i}").as_bytes()).unwrap(),
                        Some(format!("v{i}").into_bytes())
                    );
                }
                assert_eq!(s.check().unwrap().contents.len(), 500);
            }
        }
    });
    let dir = scratch();
    for role in ["create", "read"] {
        let st = child::command(
            "the_store_is_found_again_by_name_after_every_process_exits",
            role,
        )
        .env("KV_DIR", dir.path())
        .status()
        .unwrap();
        assert!(st.success(), "{role}: {st:?}");
    }
}

#[test]
fn a_segment_of_another_format_is_refused_with_its_field() {
    alone(
        "a_segment_of_another_format_is_refused_with_its_field",
        another_format,
    );
}

fn another_format() {
    let dir = scratch();
    drop(KvStore::create(dir.path(), "real", 8 << 20, Mode(0o600), 1).unwrap());
    // A segment and VASes with the store's names, holding something else.
    let mut s = NativeSpaces::open(dir.path()).unwrap();
    let sid = s.seg_alloc("kv.fake", None, 8 << 20, Mode(0o600)).unwrap();
    for (v, a) in [
        ("kv.fake.r", pmlab_vas::Access::ReadOnly),
        ("kv.fake.w", pmlab_vas::Access::ReadWrite),
    ] {
        let vid = s.vas_create(v, Mode(0o600)).unwrap();
        s.seg_attach(pmlab_vas::AttachTo::Vas(vid), sid, a).unwrap();
    }
    let vh = s.vas_attach(s.vas_find("kv.fake.w").unwrap()).unwrap();
    s.vas_switch(vh).unwrap();
    unsafe { std::ptr::copy_nonoverlapping(b"GUPSDATA".as_ptr(), s.segment_base(sid).unwrap(), 8) };
    drop(s);
    match KvStore::open(dir.path(), "fake", false) {
        Err(KvError::BadFormat {
            offset: 0,
            field: "magic",
            problem,
            ..
        }) => {
            assert!(problem.contains("GUPSDATA"), "{problem}")
        }
        other => panic!("{:?}", other.err()),
    }
    match KvStore::open(dir.path(), "nope", false) {
        Err(KvError::Vas(pmlab_vas::VasError::NotFound { .. })) => {}
        other => panic!("{:?}", other.err()),
    }
}
