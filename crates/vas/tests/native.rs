//! The native backend end to end: the paper's Figure 4, pointers valid across
//! processes, persistence of the registry, locks taken and released on switch, robust
//! recovery from a killed holder, kernel-enforced permissions for a second uid, and bad
//! input refused with its location.

use std::path::Path;

use pmlab_testkit::child;
use pmlab_vas::native::{Mechanism, NativeSpaces};
use pmlab_vas::{Access, AttachTo, Mode, SegCtl, SpaceJmp, VasCtl, VasError};

/// A fresh registry on tmpfs, in its own address window so that the tests, which run
/// as threads of one process, never place segments at the same address.
fn scratch() -> tempfile::TempDir {
    use std::sync::atomic::{AtomicU64, Ordering};
    static WINDOW: AtomicU64 = AtomicU64::new(1);
    let d = tempfile::Builder::new()
        .prefix("pmlab-vas-test")
        .tempdir_in("/dev/shm")
        .expect("tmpfs scratch");
    pmlab_vas::native::Registry::create(d.path(), WINDOW.fetch_add(1, Ordering::Relaxed)).unwrap();
    d
}

fn figure4(
    dir: &Path,
    seg: &str,
    vas: &str,
) -> (NativeSpaces, pmlab_vas::SegId, pmlab_vas::VasHandle) {
    let mut s = NativeSpaces::open(dir).unwrap();
    let vid = s.vas_create(vas, Mode(0o660)).unwrap();
    let sid = s.seg_alloc(seg, None, 1 << 16, Mode(0o660)).unwrap();
    s.seg_attach(AttachTo::Vas(vid), sid, Access::ReadWrite)
        .unwrap();
    let vid = s.vas_find(vas).unwrap();
    let vh = s.vas_attach(vid).unwrap();
    (s, sid, vh)
}

#[test]
fn figure4_pointers_stored_in_a_segment_are_valid_in_another_process() {
    child::branch(|role| {
        let dir = std::env::var("VAS_DIR").unwrap();
        let mut s = NativeSpaces::open(Path::new(&dir)).unwrap();
        let vh = s.vas_attach(s.vas_find("v0").unwrap()).unwrap();
        s.vas_switch(vh).unwrap();
        let sid = s.seg_find("s0").unwrap();
        let base = s.segment_base(sid).unwrap() as *mut u64;
        // The first word holds a pointer to the third, stored by the parent.
        let p = unsafe { *base } as *const u64;
        assert_eq!(p as u64, base as u64 + 16, "{role}");
        assert_eq!(unsafe { *p }, 42);
    });
    let dir = scratch();
    let (mut s, sid, vh) = figure4(dir.path(), "s0", "v0");
    assert_eq!(
        s.mechanism(),
        if pmlab_vas::native::pku_support().ospke {
            Mechanism::Pkeys
        } else {
            Mechanism::Mprotect
        }
    );
    s.vas_switch(vh).unwrap();
    let base = s.segment_base(sid).unwrap() as *mut u64;
    unsafe {
        *base.add(2) = 42;
        *base = base.add(2) as u64;
    }
    s.vas_switch_home().unwrap();
    drop(s); // every process leaves; the registry and the segment stay
    let st = child::command(
        "figure4_pointers_stored_in_a_segment_are_valid_in_another_process",
        "reader",
    )
    .env("VAS_DIR", dir.path())
    .status()
    .unwrap();
    assert!(st.success());
}

/// Outside the VAS the segment is inaccessible: a load faults (SIGSEGV in a child),
/// also when switching away drops the segment's page-table entries (`zap`), whose
/// stores survive in the segment.
#[test]
fn a_segment_is_inaccessible_outside_its_vas() {
    child::branch(|role| {
        let dir = std::env::var("VAS_DIR").unwrap();
        let mut s = NativeSpaces::open(Path::new(&dir)).unwrap();
        let vh = s.vas_attach(s.vas_find("v0").unwrap()).unwrap();
        let sid = s.seg_find("s0").unwrap();
        if role == "zap" {
            s.set_zap_on_switch(sid, true).unwrap();
        }
        s.vas_switch(vh).unwrap();
        unsafe { std::ptr::write_volatile(s.segment_base(sid).unwrap() as *mut u64, 41) };
        s.vas_switch_home().unwrap();
        let p = s.segment_base(sid).unwrap() as *const u64;
        let v = unsafe { std::ptr::read_volatile(p) }; // must fault
        println!("read {v} outside the VAS");
    });
    let dir = scratch();
    drop(figure4(dir.path(), "s0", "v0"));
    for role in ["toucher", "zap"] {
        let out = child::command("a_segment_is_inaccessible_outside_its_vas", role)
            .env("VAS_DIR", dir.path())
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{role}: {out:?}");
    }
    let mut s = NativeSpaces::open(dir.path()).unwrap();
    let vh = s.vas_attach(s.vas_find("v0").unwrap()).unwrap();
    let sid = s.seg_find("s0").unwrap();
    s.vas_switch(vh).unwrap();
    assert_eq!(unsafe { *(s.segment_base(sid).unwrap() as *const u64) }, 41);
    s.vas_switch_home().unwrap();
}

#[test]
fn switching_takes_and_releases_segment_locks_by_access() {
    let dir = scratch();
    let (mut s, sid, vh) = figure4(dir.path(), "s0", "v0");
    let vid = s.vas_find("v0").unwrap();
    let ro = s.vas_clone(vid, "v0-ro").unwrap();
    s.seg_detach(AttachTo::Vas(ro), sid).unwrap();
    s.seg_attach(AttachTo::Vas(ro), sid, Access::ReadOnly)
        .unwrap();
    let rh = s.vas_attach(ro).unwrap();
    let lock = pmlab_vas::native::SegLock::open(&s.registry().lock_path("s0")).unwrap();
    s.vas_switch(vh).unwrap();
    assert_eq!(lock.state().writer.map(|h| h.pid), Some(std::process::id()));
    s.vas_switch(rh).unwrap();
    let st = lock.state();
    assert_eq!((st.writer, st.readers.len()), (None, 1));
    s.vas_switch_home().unwrap();
    assert_eq!(lock.state().readers.len(), 0);
    assert_eq!(s.counters().lock_acquires, 2);
}

/// A holder killed with SIGKILL while holding the exclusive lock: the next acquirer
/// gets the lock and is told the holder's pid.
#[test]
fn a_killed_holders_lock_is_recovered_by_the_next_acquirer() {
    child::branch(|_| {
        let dir = std::env::var("VAS_DIR").unwrap();
        let mut s = NativeSpaces::open(Path::new(&dir)).unwrap();
        let vh = s.vas_attach(s.vas_find("v0").unwrap()).unwrap();
        s.vas_switch(vh).unwrap();
        println!("holding");
        std::thread::sleep(std::time::Duration::from_secs(60));
    });
    let dir = scratch();
    let (mut s, _, vh) = figure4(dir.path(), "s0", "v0");
    let mut c = child::command(
        "a_killed_holders_lock_is_recovered_by_the_next_acquirer",
        "holder",
    )
    .env("VAS_DIR", dir.path())
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // The harness prints its own lines first; wait for the child's.
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("holding") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "child ended"
        );
    }
    let lock = pmlab_vas::native::SegLock::open(&s.registry().lock_path("s0")).unwrap();
    assert_eq!(lock.state().writer.map(|h| h.pid), Some(c.id()));
    c.kill().unwrap(); // SIGKILL
    // The broken variant (no liveness check) never gets the lock back.
    let me = pmlab_vas::native::Holder::me();
    assert_eq!(lock.try_acquire_ignoring_dead(me, true).unwrap(), None);
    // Not reaped yet: a zombie counts as dead.
    let r = s.vas_switch(vh).unwrap();
    assert_eq!(r.dead_holders, vec![c.id()]);
    assert_eq!(lock.state().writer.map(|h| h.pid), Some(std::process::id()));
    c.wait().unwrap();
}

/// A second uid without write permission on a segment gets only a read-only mapping:
/// a read-write attachment is refused by the kernel, a read-only one works, and a store
/// through it faults.
#[test]
fn a_uid_without_write_permission_gets_no_writable_mapping() {
    child::branch(|role| {
        let dir = std::env::var("VAS_DIR").unwrap();
        let mut s = NativeSpaces::open(Path::new(&dir)).unwrap();
        match role {
            "rw" => match s.vas_attach(s.vas_find("v0").unwrap()) {
                Err(VasError::PermissionDenied { .. }) => {}
                other => panic!(
                    "read-write attach by uid {}: {other:?}",
                    rustix::process::getuid().as_raw()
                ),
            },
            _ => {
                let vh = s.vas_attach(s.vas_find("v0-ro").unwrap()).unwrap();
                s.vas_switch(vh).unwrap();
                let p = s.segment_base(s.seg_find("s0").unwrap()).unwrap() as *mut u64;
                assert_eq!(unsafe { std::ptr::read_volatile(p) }, 7);
                if role == "store" {
                    unsafe { std::ptr::write_volatile(p, 8) }; // must fault
                }
            }
        }
    });
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: cannot switch uid, skipped");
        return;
    }
    let dir = scratch();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let (mut s, sid, vh) = figure4(dir.path(), "s0", "v0");
    s.vas_switch(vh).unwrap();
    unsafe { *(s.segment_base(sid).unwrap() as *mut u64) = 7 };
    s.vas_switch_home().unwrap();
    let vid = s.vas_find("v0").unwrap();
    let ro = s.vas_create("v0-ro", Mode(0o644)).unwrap();
    s.seg_attach(AttachTo::Vas(ro), sid, Access::ReadOnly)
        .unwrap();
    s.vas_ctl(vid, VasCtl::SetMode(Mode(0o644))).unwrap();
    s.seg_ctl(sid, SegCtl::SetMode(Mode(0o644))).unwrap(); // others: read only
    let exe = child::ForeignExecutable::new().unwrap();
    let run = |role: &str| {
        exe.command_as(
            "a_uid_without_write_permission_gets_no_writable_mapping",
            role,
            65534,
            65534,
        )
        .env("VAS_DIR", dir.path())
        .output()
        .unwrap()
    };
    assert!(run("rw").status.success(), "{:?}", run("rw"));
    assert!(run("ro").status.success(), "{:?}", run("ro"));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(run("store").status.signal(), Some(libc::SIGSEGV));
}

#[test]
fn the_registry_survives_and_bad_input_is_refused_with_its_location() {
    let dir = scratch();
    drop(figure4(dir.path(), "s0", "v0"));
    let mut s = NativeSpaces::open(dir.path()).unwrap();
    let vid = s.vas_find("v0").unwrap();
    assert_eq!(
        s.vas_describe(vid).unwrap().segments,
        vec![("s0".to_string(), Access::ReadWrite)]
    );
    assert!(matches!(s.vas_find("nope"), Err(VasError::NotFound { .. })));
    assert!(matches!(
        s.vas_create("v0", Mode(0o600)),
        Err(VasError::Exists { .. })
    ));
    assert!(matches!(
        s.vas_create("../x", Mode(0o600)),
        Err(VasError::Invalid { .. })
    ));
    let base = s.seg_describe(s.seg_find("s0").unwrap()).unwrap().base;
    match s.seg_alloc("s1", Some(base + 4096), 4096, Mode(0o600)) {
        Err(VasError::AddressTaken { by, .. }) => assert!(by.contains("s0"), "{by}"),
        other => panic!("{other:?}"),
    }
    // A segment file of another format, and a corrupt VAS file.
    std::fs::write(dir.path().join("seg/alien.seg"), b"#!/bin/sh\necho hi\n").unwrap();
    let e = s.seg_find("alien").unwrap_err().to_string();
    assert!(e.contains("another format") && e.contains("byte 0"), "{e}");
    // While it is there, no segment can be placed (its range is unknown): refused.
    assert!(matches!(
        s.seg_alloc("s9", None, 4096, Mode(0o600)),
        Err(VasError::BadFormat { .. })
    ));
    std::fs::remove_file(dir.path().join("seg/alien.seg")).unwrap();
    std::fs::write(
        dir.path().join("vas/bad.toml"),
        "format = \"pmlab-vas 1\"\nid = \"seven\"\n",
    )
    .unwrap();
    let e = s.vas_find("bad").unwrap_err().to_string();
    assert!(e.contains("line 2"), "{e}");
    // A directory that is not a registry.
    let other = tempfile::tempdir_in("/dev/shm").unwrap();
    assert!(NativeSpaces::open_with(other.path(), Default::default(), false).is_err());
    // A range already mapped in this process (not a segment): MAP_FIXED_NOREPLACE.
    let sid = s.seg_alloc("s2", None, 1 << 16, Mode(0o600)).unwrap();
    let b = s.seg_describe(sid).unwrap().base;
    let blocker = unsafe {
        libc::mmap(
            b as *mut _,
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    assert_eq!(blocker as u64, b);
    let v = s.vas_create("v2", Mode(0o600)).unwrap();
    s.seg_attach(AttachTo::Vas(v), sid, Access::ReadWrite)
        .unwrap();
    match s.vas_attach(v) {
        Err(VasError::AddressTaken { by, .. }) => assert!(by.contains("existing mapping"), "{by}"),
        other => panic!("{other:?}"),
    }
    unsafe { libc::munmap(blocker, 4096) };
    // Nothing persistent was lost.
    assert!(s.vas_attach(vid).is_ok());
    assert!(matches!(
        s.seg_ctl(s.seg_find("s0").unwrap(), SegCtl::Remove),
        Err(VasError::Refused(_))
    ));
}

#[test]
fn private_segments_clones_and_handle_attachments() {
    let dir = scratch();
    let (mut s, sid, vh) = figure4(dir.path(), "s0", "v0");
    let heap = s.seg_alloc_private("scratch", 1 << 16).unwrap();
    assert!(
        s.seg_attach(
            AttachTo::Vas(s.vas_find("v0").unwrap()),
            heap,
            Access::ReadWrite
        )
        .is_err()
    );
    s.seg_attach(AttachTo::Handle(vh), heap, Access::ReadWrite)
        .unwrap();
    s.vas_switch(vh).unwrap();
    unsafe { *(s.segment_base(heap).unwrap() as *mut u64) = 5 };
    unsafe { *(s.segment_base(sid).unwrap() as *mut u64) = 9 };
    s.vas_switch_home().unwrap();
    let c = s.seg_clone(sid, "s0-copy").unwrap();
    let info = s.seg_describe(c).unwrap();
    assert_eq!(
        info.base,
        s.seg_describe(sid).unwrap().base,
        "a clone keeps the address"
    );
    let v = s.vas_create("vc", Mode(0o600)).unwrap();
    s.seg_attach(AttachTo::Vas(v), c, Access::ReadOnly).unwrap();
    // The original is mapped here, so the clone cannot be.
    assert!(matches!(
        s.vas_attach(v),
        Err(VasError::AddressTaken { .. })
    ));
    s.vas_detach(vh).unwrap();
    let h = s.vas_attach(v).unwrap();
    s.vas_switch(h).unwrap();
    assert_eq!(unsafe { *(s.segment_base(c).unwrap() as *const u64) }, 9);
}

/// The `resident` mechanism: switches make no system call (zero `mprotect`s, where
/// the `mprotect` mechanism makes some for the same switches), and locks are taken
/// and released exactly as on the other mechanisms.
#[test]
fn resident_switches_change_no_protection_and_keep_the_lock_protocol() {
    use pmlab_vas::native::MechanismChoice;
    let dir = scratch();
    drop(figure4(dir.path(), "s0", "v0"));
    let mut setup = NativeSpaces::open(dir.path()).unwrap();
    let vid = setup.vas_find("v0").unwrap();
    let sid = setup.seg_find("s0").unwrap();
    setup.seg_ctl(sid, SegCtl::SetLockable(true)).unwrap();
    let ro = setup.vas_create("v0-ro", Mode(0o660)).unwrap();
    setup
        .seg_attach(AttachTo::Vas(ro), sid, Access::ReadOnly)
        .unwrap();
    drop(setup);
    let mut mprotects = Vec::new();
    for choice in [MechanismChoice::Mprotect, MechanismChoice::Resident] {
        let mut s = NativeSpaces::open_with(dir.path(), choice, false).unwrap();
        let (wh, rh) = (s.vas_attach(vid).unwrap(), s.vas_attach(ro).unwrap());
        let lock = pmlab_vas::native::SegLock::open(&s.registry().lock_path("s0")).unwrap();
        for _ in 0..3 {
            s.vas_switch(wh).unwrap();
            assert_eq!(lock.state().writer.map(|h| h.pid), Some(std::process::id()));
            unsafe { std::ptr::write_volatile(s.segment_base(sid).unwrap() as *mut u64, 9) };
            s.vas_switch(rh).unwrap();
            let st = lock.state();
            assert_eq!((st.writer, st.readers.len()), (None, 1), "{choice:?}");
            s.vas_switch_home().unwrap();
            assert_eq!(lock.state().readers.len(), 0);
        }
        let c = s.counters();
        assert_eq!((c.switches, c.lock_acquires), (9, 6), "{choice:?}");
        mprotects.push(c.mprotects);
    }
    assert!(mprotects[0] > 0, "the mprotect mechanism counts its calls");
    assert_eq!(mprotects[1], 0, "resident switches made mprotect calls");
}

/// What `resident` gives up, shown rather than argued: a switched-out segment stays
/// readable from the same process (where `mprotect` makes the load fault).
#[test]
fn resident_leaves_a_switched_out_segment_reachable_from_the_process() {
    child::branch(|role| {
        let dir = std::env::var("VAS_DIR").unwrap();
        let choice = pmlab_vas::native::MechanismChoice::parse(role).unwrap();
        let mut s = NativeSpaces::open_with(Path::new(&dir), choice, false).unwrap();
        let vh = s.vas_attach(s.vas_find("v0").unwrap()).unwrap();
        let sid = s.seg_find("s0").unwrap();
        s.vas_switch(vh).unwrap();
        unsafe { std::ptr::write_volatile(s.segment_base(sid).unwrap() as *mut u64, 5) };
        s.vas_switch_home().unwrap();
        let v = unsafe { std::ptr::read_volatile(s.segment_base(sid).unwrap() as *const u64) };
        println!("read {v} outside the VAS");
    });
    let dir = scratch();
    drop(figure4(dir.path(), "s0", "v0"));
    let run = |role: &str| {
        child::command(
            "resident_leaves_a_switched_out_segment_reachable_from_the_process",
            role,
        )
        .env("VAS_DIR", dir.path())
        .output()
        .unwrap()
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(run("mprotect").status.signal(), Some(libc::SIGSEGV));
    let out = run("resident");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("read 5 outside the VAS"));
}

/// The security rule holds on `resident`: a second uid that may only read the segment
/// gets a read-only mapping (its /proc/self/maps line has no `w`), a read-write attach
/// is refused by the kernel, and a store through its mapping dies with SIGSEGV. The
/// deliberately broken variant (a private writable mapping of the read-only segment)
/// is caught by the same checks.
#[test]
fn resident_gives_a_reader_uid_no_writable_mapping() {
    child::branch(|role| {
        let dir = std::env::var("VAS_DIR").unwrap();
        let choice = pmlab_vas::native::MechanismChoice::Resident;
        let mut s = NativeSpaces::open_with(Path::new(&dir), choice, false).unwrap();
        if role.starts_with("broken") {
            s.break_resident_rights_for_tests();
        }
        if let Ok(vh) = s.vas_attach(s.vas_find("v0").unwrap()) {
            println!("read-write attach allowed");
            s.vas_detach(vh).unwrap();
        }
        let vh = s.vas_attach(s.vas_find("v0-ro").unwrap()).unwrap();
        s.vas_switch(vh).unwrap();
        let p = s.segment_base(s.seg_find("s0").unwrap()).unwrap() as *mut u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| l.starts_with(&format!("{:x}-", p as u64)))
            .unwrap();
        println!("maps line: {line}");
        assert_eq!(unsafe { std::ptr::read_volatile(p) }, 7);
        if role.ends_with("store") {
            unsafe { std::ptr::write_volatile(p, 8) }; // must fault
            println!("stored through the mapping");
        }
    });
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: cannot switch uid, skipped");
        return;
    }
    let dir = scratch();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let (mut s, sid, vh) = figure4(dir.path(), "s0", "v0");
    s.vas_switch(vh).unwrap();
    unsafe { *(s.segment_base(sid).unwrap() as *mut u64) = 7 };
    s.vas_switch_home().unwrap();
    let vid = s.vas_find("v0").unwrap();
    let ro = s.vas_create("v0-ro", Mode(0o644)).unwrap();
    s.seg_attach(AttachTo::Vas(ro), sid, Access::ReadOnly)
        .unwrap();
    s.vas_ctl(vid, VasCtl::SetMode(Mode(0o644))).unwrap();
    s.seg_ctl(sid, SegCtl::SetMode(Mode(0o644))).unwrap();
    let exe = child::ForeignExecutable::new().unwrap();
    let check = |variant: &str| -> Result<(), String> {
        let run = |role: String| {
            exe.command_as(
                "resident_gives_a_reader_uid_no_writable_mapping",
                &role,
                65534,
                65534,
            )
            .env("VAS_DIR", dir.path())
            .output()
            .unwrap()
        };
        let out = run(format!("{variant}-look"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() || text.contains("read-write attach allowed") {
            return Err(format!("reader: {out:?}"));
        }
        let perms = text
            .lines()
            .find_map(|l| l.split("maps line: ").nth(1))
            .and_then(|l| l.split_whitespace().nth(1))
            .ok_or(format!("reader printed no mapping: {text}"))?
            .to_string();
        if perms.contains('w') {
            return Err(format!("the reader holds a writable mapping ({perms})"));
        }
        use std::os::unix::process::ExitStatusExt;
        let out = run(format!("{variant}-store"));
        if out.status.signal() != Some(libc::SIGSEGV) {
            return Err(format!(
                "a store through the reader's mapping did not fault: {out:?}"
            ));
        }
        Ok(())
    };
    check("resident").unwrap();
    let e = check("broken").unwrap_err();
    eprintln!("caught the broken variant: {e}");
    assert!(e.contains("writable mapping (rw-p)"), "{e}");
    // The parent's own stores are where they were: the broken reader's was private.
    s.vas_switch(vh).unwrap();
    assert_eq!(unsafe { *(s.segment_base(sid).unwrap() as *const u64) }, 7);
    s.vas_switch_home().unwrap();
}

/// A VAS found, then changed by another process (a segment attached to it, then the
/// VAS replaced by another of the same name) before this one attaches it: the attach
/// follows what the registry holds then, not the record `vas_find` read. And leaving
/// a VAS by detaching it releases its lock with the segment unmapped.
#[test]
fn an_attach_after_a_change_since_find_sees_the_change() {
    let dir = scratch();
    let mut maker = NativeSpaces::open(dir.path()).unwrap();
    let vid = maker.vas_create("v", Mode(0o660)).unwrap();
    let s1 = maker.seg_alloc("s1", None, 1 << 16, Mode(0o660)).unwrap();
    maker.seg_ctl(s1, SegCtl::SetLockable(true)).unwrap();
    let mut user = NativeSpaces::open(dir.path()).unwrap();
    let found = user.vas_find("v").unwrap();
    assert_eq!(found, vid);
    maker
        .seg_attach(AttachTo::Vas(vid), s1, Access::ReadWrite)
        .unwrap();
    let vh = user.vas_attach(found).unwrap();
    user.vas_switch(vh).unwrap();
    assert_eq!(user.segment_in(vh, "s1"), Some(s1));
    assert_eq!(user.active_access(s1), Some(Access::ReadWrite));
    let base = user.segment_base(s1).unwrap();
    // SAFETY: the segment is mapped read-write while its VAS is switched in.
    unsafe { std::ptr::write_volatile(base, 7u8) };
    // Held exclusively while switched in; detaching unmaps and releases it.
    let lock = pmlab_vas::native::SegLock::open(&user.registry().lock_path("s1")).unwrap();
    assert!(lock.state().writer.is_some());
    user.vas_detach(vh).unwrap();
    assert!(lock.state().writer.is_none(), "{:?}", lock.state());
    assert_eq!(user.segment_base(s1), None);

    // Replaced: removed and made again under the same name with another id.
    let found = user.vas_find("v").unwrap();
    maker.vas_ctl(vid, VasCtl::Remove).unwrap();
    let again = maker.vas_create("v", Mode(0o660)).unwrap();
    assert_ne!(again, vid);
    assert!(user.vas_attach(found).is_err(), "the VAS found is gone");
    let vh = user.vas_attach(user.vas_find("v").unwrap()).unwrap();
    assert_eq!(user.segment_in(vh, "s1"), None);
}
