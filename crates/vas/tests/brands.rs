//! SpaceJMP §3.3's rules, enforced by types (compile-fail tests) and at run time
//! (the checked mode), and the branded API used correctly across two VASes.

use std::path::Path;

use pmlab_vas::brand::{Checked, Global, SegPtr, enter};
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{Access, AttachTo, Mode, SpaceJmp};

/// Every rule, broken, fails to compile; the explicit cast compiles.
#[test]
fn each_rule_broken_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/compile_fail/*.rs");
    t.pass("tests/compile_pass/*.rs");
}

fn two_vases(
    dir: &Path,
) -> (
    NativeSpaces,
    [pmlab_vas::VasHandle; 2],
    [pmlab_vas::SegId; 3],
) {
    pmlab_vas::native::Registry::create(dir, 30).unwrap();
    let mut s = NativeSpaces::open(dir).unwrap();
    let va = s.vas_create("a", Mode(0o600)).unwrap();
    let vb = s.vas_create("b", Mode(0o600)).unwrap();
    let sa = s.seg_alloc("sa", None, 4096, Mode(0o600)).unwrap();
    let sb = s.seg_alloc("sb", None, 4096, Mode(0o600)).unwrap();
    s.seg_attach(AttachTo::Vas(va), sa, Access::ReadWrite)
        .unwrap();
    s.seg_attach(AttachTo::Vas(vb), sb, Access::ReadWrite)
        .unwrap();
    let ha = s.vas_attach(va).unwrap();
    let hb = s.vas_attach(vb).unwrap();
    let heap = s.seg_alloc_private("heap", 4096).unwrap();
    s.seg_attach(AttachTo::Handle(ha), heap, Access::ReadWrite)
        .unwrap();
    (s, [ha, hb], [sa, sb, heap])
}

#[test]
fn branded_pointers_link_data_and_switch_safely() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (mut s, [ha, hb], [sa, sb, heap]) = two_vases(dir.path());
    let got = enter(&mut s, ha, |v| {
        let head = v.global::<SegPtr<u64, Global>>(sa, 0).unwrap();
        let value = v.global::<u64>(sa, 64).unwrap();
        value.set(v, 42);
        head.store_ptr(v, value);
        // A private slot may hold a global pointer.
        let mine = v.private::<SegPtr<u64, Global>>(heap, 0).unwrap();
        mine.store_ptr(v, value);
        let inner = v.switch(hb, |w| {
            let x = w.global::<u64>(sb, 0).unwrap();
            x.set(w, 7);
            x.get(w)
        });
        (
            head.load_ptr(v).get(v),
            inner.unwrap(),
            mine.load_ptr(v).get(v),
        )
    })
    .unwrap();
    assert_eq!(got, (42, 7, 42));
    assert_eq!(s.current(), None, "enter switches back home");
    // A segment of another VAS is refused at run time too.
    let e = enter(&mut s, ha, |v| v.global::<u64>(sb, 0).map(|_| ())).unwrap();
    assert!(e.is_err());
}

/// The checked mode catches what types cannot see: a pointer kept across a switch, and
/// a private pointer stored into a global segment.
#[test]
fn the_checked_mode_refuses_wrong_vas_and_private_into_global() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let (mut s, [ha, hb], [sa, _, heap]) = two_vases(dir.path());
    s.vas_switch(ha).unwrap();
    let p = Checked::<u64>::at(&s, sa, 0).unwrap();
    let q = Checked::<u64>::at(&s, heap, 0).unwrap();
    p.set(&s, 3).unwrap();
    assert_eq!(p.get(&s).unwrap(), 3);
    let e = p.store_ptr(&s, &q).unwrap_err().to_string();
    assert!(e.contains("private pointer"), "{e}");
    q.store_ptr(&s, &p).unwrap();
    s.vas_switch(hb).unwrap();
    let e = p.get(&s).unwrap_err().to_string();
    assert!(e.contains("used while handle"), "{e}");
    s.vas_switch_home().unwrap();
    assert!(p.set(&s, 1).is_err());
}
