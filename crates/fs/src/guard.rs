//! Surviving a data space cut short under a mapping.
//!
//! A client that may write a domain holds a read-write descriptor of its data space
//! (a read-write shared mapping needs one), and with it can `ftruncate` the file. Every
//! other process mapping the space, clients of other users that may only read it
//! included, would then die of SIGBUS at its next load beyond the new end. Linux seals
//! a file's size only for memfds, not for files on tmpfs (which stand for SCM here; a
//! device-DAX space cannot be resized at all), so libFS makes its readers survive it
//! instead, the way Wayland compositors survive clients shrinking their shared-memory
//! buffers: a SIGBUS handler that finds the faulting address in a registered data
//! mapping puts a private zero page over the faulting page and notes the hit; the
//! access then completes (reading zeros), and libFS, which checks the note after every
//! copy, reports the copy as an I/O error and maps the space again. The service puts
//! the file's size back within one tick ([`crate::service`]). A SIGBUS anywhere else is
//! handed to the handler that was installed before, or kills the process as it would
//! have without this one.

use std::sync::Once;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Data mappings that can be registered at once (a client maps one per domain it uses).
const SLOTS: usize = 128;

static START: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static HIT: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
static INSTALL: Once = Once::new();
/// The SIGBUS disposition before ours, for faults that are not ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

const PAGE: usize = 4096;

/// A registered mapping; unregistered on drop.
#[derive(Debug)]
pub struct Guard {
    slot: usize,
}

impl Guard {
    /// Registers `[start, start + len)` (a data-space mapping); `None` if every slot is
    /// taken (the mapping then works unguarded, as before).
    pub fn register(start: *const u8, len: usize) -> Option<Guard> {
        install();
        for slot in 0..SLOTS {
            if LEN[slot]
                .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                HIT[slot].store(false, Ordering::Release);
                START[slot].store(start as usize, Ordering::Release);
                LEN[slot].store(len, Ordering::Release);
                return Some(Guard { slot });
            }
        }
        None
    }

    /// Whether a SIGBUS hit the mapping since it was registered (its pages there now
    /// read as zeros, not as the file).
    pub fn hit(&self) -> bool {
        HIT[self.slot].load(Ordering::Acquire)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        START[self.slot].store(0, Ordering::Release);
        LEN[self.slot].store(0, Ordering::Release);
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: sigaction with a zeroed struct filled in as the man page says; the
        // handler only reads atomics, calls mmap and sigaction, and stores an atomic.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &sa, &mut old) == 0 {
                let _ = PREVIOUS.set(old);
            }
        }
    });
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for slot in 0..SLOTS {
        let len = LEN[slot].load(Ordering::Acquire);
        let start = START[slot].load(Ordering::Acquire);
        if len == 0 || len == usize::MAX || addr < start || addr - start >= len {
            continue;
        }
        let page = addr & !(PAGE - 1);
        // SAFETY: the page lies in a mapping this process made; a private zero page
        // replaces it, which is exactly what the handler is for.
        let r = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if r != libc::MAP_FAILED {
            HIT[slot].store(true, Ordering::Release);
            return;
        }
    }
    // Not ours: the previous disposition decides.
    // SAFETY: calling the previously installed handler with the arguments we got, or
    // restoring the default action so that the fault, repeated on return, kills.
    unsafe {
        match PREVIOUS.get() {
            Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
                if p.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(p.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(p.sa_sigaction);
                    f(sig);
                }
            }
            _ => {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
            }
        }
    }
}
