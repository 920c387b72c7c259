//! GUPS natively: MAP with `mmap`/`munmap`, MP with forked processes and futex
//! messages, VAS with pmlab-vas's native switch.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rustix::fd::OwnedFd;
use rustix::mm::{MapFlags, ProtFlags};

use super::gups::GupsShape;
use pmlab_vas::native::{NativeSpaces, Registry};
use pmlab_vas::{Access, AttachTo, Mode, SpaceJmp};

/// What a native run measured.
pub struct NativeRun {
    /// Seconds.
    pub seconds: f64,
    /// Window changes made.
    pub changes: u64,
    /// XOR of every word of each window afterwards.
    pub checksums: Vec<u64>,
}

/// Draws a visit into `buf` (indices then values), returning its window.
fn draw(rng: &mut Xoshiro256PlusPlus, shape: &GupsShape, buf: &mut [u64]) -> u32 {
    let w = (rng.next_u64() % u64::from(shape.windows)) as u32;
    let n = shape.update_set as usize;
    for i in 0..n {
        buf[i] = rng.next_u64() % shape.words();
        buf[n + i] = rng.next_u64();
    }
    w
}

/// Applies a visit's updates to the window at `base`.
///
/// # Safety
/// `base` must point to a writable window of `shape.words()` words.
unsafe fn apply(base: *mut u64, buf: &[u64], n: usize) {
    for i in 0..n {
        // SAFETY: indices are below the window's word count.
        unsafe { *base.add(buf[i] as usize) ^= buf[n + i] };
    }
}

fn checksum(base: *const u64, words: u64) -> u64 {
    // SAFETY: the caller's window of `words` words is mapped readable.
    (0..words).fold(0, |a, i| a ^ unsafe { *base.add(i as usize) })
}

fn table(shape: &GupsShape) -> std::io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create("pmlab-gups", rustix::fs::MemfdFlags::CLOEXEC)?;
    let bytes = shape.window_bytes * u64::from(shape.windows);
    rustix::fs::ftruncate(&fd, bytes)?;
    rustix::fs::fallocate(&fd, rustix::fs::FallocateFlags::empty(), 0, bytes)?;
    Ok(fd)
}

fn map_window(fd: &OwnedFd, shape: &GupsShape, w: u32) -> std::io::Result<*mut u64> {
    // SAFETY: a fresh mapping of the window's range of the table, populated (its page
    // tables built) now, as the paper's MAP design does on each change.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            shape.window_bytes as usize,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED | MapFlags::POPULATE,
            fd,
            shape.window_bytes * u64::from(w),
        )
    }?;
    Ok(p.cast())
}

fn unmap(p: *mut u64, bytes: u64) {
    // SAFETY: a window mapping made by `map_window`.
    let _ = unsafe { rustix::mm::munmap(p.cast(), bytes as usize) };
}

/// MAP: remap on every window change.
pub fn run_map(shape: &GupsShape, seed: u64) -> std::io::Result<NativeRun> {
    let fd = table(shape)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = shape.update_set as usize;
    let mut buf = vec![0u64; 2 * n];
    let (mut cur, mut p) = (0u32, map_window(&fd, shape, 0)?);
    let mut changes = 0;
    let t = Instant::now();
    for _ in 0..shape.visits() {
        let w = draw(&mut rng, shape, &mut buf);
        if w != cur {
            unmap(p, shape.window_bytes);
            p = map_window(&fd, shape, w)?;
            cur = w;
            changes += 1;
        }
        // SAFETY: p maps window `cur`.
        unsafe { apply(p, &buf, n) };
    }
    let seconds = t.elapsed().as_secs_f64();
    unmap(p, shape.window_bytes);
    let mut checksums = Vec::new();
    for w in 0..shape.windows {
        let p = map_window(&fd, shape, w)?;
        checksums.push(checksum(p, shape.words()));
        unmap(p, shape.window_bytes);
    }
    Ok(NativeRun {
        seconds,
        changes,
        checksums,
    })
}

/// A message channel in shared memory between the master and one window's process.
#[repr(C)]
struct Channel {
    /// Bumped by the master for each request; u32::MAX asks the worker to exit.
    request: AtomicU32,
    /// Set to the request number once applied.
    done: AtomicU32,
    /// The checksum the worker reports when it exits.
    checksum: std::sync::atomic::AtomicU64,
    buf: [u64; 128],
}

fn futex_wait(word: &AtomicU32, seen: u32) {
    // SAFETY: a futex wait on a word of shared memory; spurious wakeups are re-checked.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            seen,
            std::ptr::null::<libc::timespec>(),
        )
    };
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}

/// The worker's loop: apply each request to its window until asked to exit.
fn worker(ch: &Channel, window: *mut u64, shape: &GupsShape) -> ! {
    let n = shape.update_set as usize;
    let mut last = 0;
    loop {
        let r = ch.request.load(Ordering::Acquire);
        if r == last {
            futex_wait(&ch.request, r);
            continue;
        }
        if r == u32::MAX {
            ch.checksum
                .store(checksum(window, shape.words()), Ordering::Release);
            ch.done.store(r, Ordering::Release);
            futex_wake(&ch.done);
            // SAFETY: leave the forked child at once, running no destructors or atexit
            // handlers of the parent's state.
            unsafe { libc::_exit(0) };
        }
        // SAFETY: the window is this process's own mapping.
        unsafe { apply(window, &ch.buf, n) };
        last = r;
        ch.done.store(r, Ordering::Release);
        futex_wake(&ch.done);
    }
}

fn send_and_wait(ch: &Channel, seq: u32) {
    ch.request.store(seq, Ordering::Release);
    futex_wake(&ch.request);
    // The futex waits only while `done` still holds the value seen not to be `seq`: a
    // fresh load there could already read `seq`, and the wait would then sleep past
    // the worker's one wake-up for good.
    loop {
        let d = ch.done.load(Ordering::Acquire);
        if d == seq {
            break;
        }
        futex_wait(&ch.done, d);
    }
}

/// MP: one forked process per window (each maps only its own window), messages over
/// shared memory with futex wake-ups. The master blocks on each, as in the paper.
pub fn run_mp(shape: &GupsShape, seed: u64) -> std::io::Result<NativeRun> {
    if shape.windows == 1 {
        return run_map(shape, seed);
    }
    let fd = table(shape)?;
    let bytes = std::mem::size_of::<Channel>() * shape.windows as usize;
    // SAFETY: fresh shared anonymous memory for the channels (zeroed: all counters 0).
    let chans = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            bytes,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
        )
    }? as *mut Channel;
    let ch = |w: u32| -> &Channel {
        // SAFETY: `w` < windows; the channels live until the end of this function.
        unsafe { &*chans.add(w as usize) }
    };
    let mut pids = Vec::new();
    for w in 0..shape.windows {
        let window = map_window(&fd, shape, w)?;
        // SAFETY: the child only runs `worker`, which allocates nothing and ends in _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if pid == 0 {
            worker(ch(w), window, shape);
        }
        unmap(window, shape.window_bytes);
        pids.push(pid);
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let n = shape.update_set as usize;
    let mut seqs = vec![0u32; shape.windows as usize];
    let mut buf = vec![0u64; 2 * n];
    let t = Instant::now();
    for _ in 0..shape.visits() {
        let w = draw(&mut rng, shape, &mut buf);
        let c = ch(w);
        // SAFETY: the worker is blocked until the request number changes.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), c.buf.as_ptr().cast_mut(), 2 * n) };
        seqs[w as usize] += 1;
        send_and_wait(c, seqs[w as usize]);
    }
    let seconds = t.elapsed().as_secs_f64();
    let mut checksums = Vec::new();
    for (w, pid) in pids.iter().enumerate() {
        send_and_wait(ch(w as u32), u32::MAX);
        checksums.push(ch(w as u32).checksum.load(Ordering::Acquire));
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(*pid, std::ptr::null_mut(), 0) };
    }
    // SAFETY: the channel mapping made above; the workers have exited.
    unsafe { rustix::mm::munmap(chans.cast(), bytes) }?;
    Ok(NativeRun {
        seconds,
        changes: shape.visits(),
        checksums,
    })
}

/// VAS: one VAS per window (its window segment plus the shared heap segment that
/// holds the pending updates), a registry in `dir`, reached by `vas_switch`.
pub fn run_vas(
    shape: &GupsShape,
    seed: u64,
    dir: &std::path::Path,
) -> Result<NativeRun, pmlab_vas::VasError> {
    Registry::create(dir, 29)?;
    let mut s = NativeSpaces::open_with(dir, Default::default(), false)?;
    let heap = s.seg_alloc("heap", None, 4096, Mode(0o600))?;
    let mut handles = Vec::new();
    let mut windows = Vec::new();
    for w in 0..shape.windows {
        let seg = s.seg_alloc(&format!("window{w}"), None, shape.window_bytes, Mode(0o600))?;
        let v = s.vas_create(&format!("gups{w}"), Mode(0o600))?;
        s.seg_attach(AttachTo::Vas(v), heap, Access::ReadWrite)?;
        s.seg_attach(AttachTo::Vas(v), seg, Access::ReadWrite)?;
        handles.push(s.vas_attach(v)?);
        windows.push(s.segment_base(seg).expect("attached") as *mut u64);
    }
    // Pages present from the start, as SCM would be (the paper reserves a segment's
    // frames when it is created).
    for (w, &h) in handles.iter().enumerate() {
        s.vas_switch(h)?;
        // SAFETY: the window is switched in, read-write.
        unsafe { std::ptr::write_bytes(windows[w].cast::<u8>(), 0, shape.window_bytes as usize) };
    }
    let pending = s.segment_base(heap).expect("attached") as *mut u64;
    let n = shape.update_set as usize;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut cur = 0usize;
    s.vas_switch(handles[0])?;
    let mut changes = 0;
    let t = Instant::now();
    for _ in 0..shape.visits() {
        // SAFETY: the heap segment is in every VAS, so it is switched in.
        let buf = unsafe { std::slice::from_raw_parts_mut(pending, 2 * n) };
        let w = draw(&mut rng, shape, buf) as usize;
        if w != cur {
            s.vas_switch(handles[w])?;
            cur = w;
            changes += 1;
        }
        // SAFETY: window `w`'s VAS is active, so its segment is writable.
        unsafe { apply(windows[w], buf, n) };
    }
    let seconds = t.elapsed().as_secs_f64();
    let mut checksums = Vec::new();
    for (w, &h) in handles.iter().enumerate() {
        s.vas_switch(h)?;
        checksums.push(checksum(windows[w], shape.words()));
    }
    s.vas_switch_home()?;
    Ok(NativeRun {
        seconds,
        changes,
        checksums,
    })
}
