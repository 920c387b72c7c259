//! PMDK's libpmemobj as the real peer of `pmlab tx bench --vs-pmdk`: the same SPS
//! workload (an array of 8-byte integers, random swaps of two entries, one swap per
//! transaction, the same pairs in the same order) written with PMDK's own transaction
//! API — `pmemobj_create`/`pmemobj_open`, `pmemobj_root`, `pmemobj_tx_begin`,
//! `pmemobj_tx_add_range_direct` for both entries, the stores, `pmemobj_tx_commit`,
//! `pmemobj_tx_end` — which is exactly what PMDK's `TX_BEGIN`/`TX_ADD`/`TX_END` macros
//! expand to, minus their `setjmp` (pmlab passes no jump buffer).
//!
//! The library is loaded at run time (`libpmemobj.so.1`, Debian's `libpmemobj1`, which
//! `libpmemobj-dev` brings), so pmlab builds and runs without it; [`Pmdk::load`] says
//! clearly when it is missing. PMDK decides at pool open whether the pool is persistent
//! memory; on tmpfs it is not, unless `PMEM_IS_PMEM_FORCE=1` is in the environment when
//! the library is loaded (then it flushes with clwb/clflushopt + sfence, like pmlab, and
//! [`PmdkPool::is_pmem`] says so). Without it PMDK would `msync` every commit.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::Path;

use libloading::Library;

/// PMDK's persistent object id (`PMEMoid`), passed and returned by value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct PmemOid {
    pool_uuid_lo: u64,
    off: u64,
}

type Create = unsafe extern "C" fn(*const c_char, *const c_char, usize, u32) -> *mut c_void;
type Open = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut c_void;
type Close = unsafe extern "C" fn(*mut c_void);
type Root = unsafe extern "C" fn(*mut c_void, usize) -> PmemOid;
type Direct = unsafe extern "C" fn(PmemOid) -> *mut c_void;
type Persist = unsafe extern "C" fn(*mut c_void, *const c_void, usize);
type TxBegin = unsafe extern "C" fn(*mut c_void, *mut c_void, ...) -> c_int;
type TxAddRangeDirect = unsafe extern "C" fn(*const c_void, usize) -> c_int;
type TxCommit = unsafe extern "C" fn();
type TxEnd = unsafe extern "C" fn() -> c_int;
type TxAbort = unsafe extern "C" fn(c_int);
type ErrorMsg = unsafe extern "C" fn() -> *const c_char;
type IsPmem = unsafe extern "C" fn(*const c_void, usize) -> c_int;
type CheckVersion = unsafe extern "C" fn(u32, u32) -> *const c_char;

/// The libpmemobj API major version these prototypes are from.
const API_MAJOR: u32 = 2;
/// `TX_PARAM_NONE`, the end of `pmemobj_tx_begin`'s parameter list.
const TX_PARAM_NONE: c_int = 0;
/// The environment variable that names another libpmemobj to load.
pub const LIB_ENV: &str = "PMLAB_PMDK_LIB";
/// The environment variable that makes PMDK treat any mapping as persistent memory.
pub const FORCE_PMEM_ENV: &str = "PMEM_IS_PMEM_FORCE";

/// The functions of libpmemobj (and libpmem's `pmem_is_pmem`) that the peer uses.
pub struct Pmdk {
    create: Create,
    open: Open,
    close: Close,
    root: Root,
    direct: Direct,
    persist: Persist,
    tx_begin: TxBegin,
    tx_add_range_direct: TxAddRangeDirect,
    tx_commit: TxCommit,
    tx_end: TxEnd,
    tx_abort: TxAbort,
    errormsg: ErrorMsg,
    is_pmem: Option<IsPmem>,
    version: String,
    _pmem: Option<Library>,
    _obj: Library,
}

/// Why PMDK cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PmdkError {
    /// The library is not installed.
    #[error(
        "PMDK's libpmemobj is not installed ({0}); install Debian's libpmemobj-dev (or libpmemobj1) to compare with PMDK"
    )]
    Missing(String),
    /// A PMDK call failed.
    #[error("PMDK: {what}: {message}")]
    Call {
        /// The call.
        what: &'static str,
        /// PMDK's own message (`pmemobj_errormsg`).
        message: String,
    },
}

fn sym<T: Copy>(lib: &Library, name: &[u8]) -> Result<T, PmdkError> {
    // SAFETY: each type above is the C prototype of the symbol of that name in
    // libpmemobj 1.x's headers (<libpmemobj/*.h>); the library outlives the pointer
    // (kept in the same struct).
    unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
        PmdkError::Missing(format!(
            "symbol {}: {e}",
            String::from_utf8_lossy(&name[..name.len() - 1])
        ))
    })
}

impl Pmdk {
    /// Loads `libpmemobj.so.1` — or the library named by `PMLAB_PMDK_LIB`, for a PMDK
    /// built elsewhere — and `libpmem.so.1` for `pmem_is_pmem`.
    pub fn load() -> Result<Pmdk, PmdkError> {
        let name = std::env::var_os(LIB_ENV).unwrap_or_else(|| "libpmemobj.so.1".into());
        // SAFETY: loading a shared library runs its constructors; libpmemobj's only
        // initialise the library itself.
        let obj = unsafe { Library::new(&name) }.map_err(|e| PmdkError::Missing(e.to_string()))?;
        // SAFETY: as above, for libpmem (which libpmemobj has loaded already).
        let pmem = unsafe { Library::new("libpmem.so.1") }.ok();
        let is_pmem = pmem
            .as_ref()
            .and_then(|l| sym::<IsPmem>(l, b"pmem_is_pmem\0").ok());
        let check_version: CheckVersion = sym(&obj, b"pmemobj_check_version\0")?;
        // SAFETY: pmemobj_check_version(major, minor) returns NULL when the library
        // provides that API version, else a static message. The prototypes above are
        // those of PMEMOBJ_MAJOR_VERSION 2 (PMDK 1.5 and later; Debian's 1.12 is 2.4).
        let check = unsafe { check_version(API_MAJOR, 0) };
        let version = if check.is_null() {
            format!("libpmemobj.so.1 (API {API_MAJOR}.x)")
        } else {
            // SAFETY: a NUL-terminated static string from the library.
            let why = unsafe { CStr::from_ptr(check) }
                .to_string_lossy()
                .into_owned();
            return Err(PmdkError::Missing(format!(
                "libpmemobj.so.1 does not offer API {API_MAJOR}.0: {why}"
            )));
        };
        Ok(Pmdk {
            create: sym(&obj, b"pmemobj_create\0")?,
            open: sym(&obj, b"pmemobj_open\0")?,
            close: sym(&obj, b"pmemobj_close\0")?,
            root: sym(&obj, b"pmemobj_root\0")?,
            direct: sym(&obj, b"pmemobj_direct\0")?,
            persist: sym(&obj, b"pmemobj_persist\0")?,
            tx_begin: sym(&obj, b"pmemobj_tx_begin\0")?,
            tx_add_range_direct: sym(&obj, b"pmemobj_tx_add_range_direct\0")?,
            tx_commit: sym(&obj, b"pmemobj_tx_commit\0")?,
            tx_end: sym(&obj, b"pmemobj_tx_end\0")?,
            tx_abort: sym(&obj, b"pmemobj_tx_abort\0")?,
            errormsg: sym(&obj, b"pmemobj_errormsg\0")?,
            is_pmem,
            version,
            _pmem: pmem,
            _obj: obj,
        })
    }

    /// What `pmemobj_check_version` said.
    pub fn version(&self) -> &str {
        &self.version
    }

    fn error(&self, what: &'static str) -> PmdkError {
        // SAFETY: returns the calling thread's last error message (static storage).
        let msg = unsafe { (self.errormsg)() };
        let message = if msg.is_null() {
            "no message".to_string()
        } else {
            // SAFETY: NUL-terminated, owned by the library.
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .into_owned()
        };
        PmdkError::Call { what, message }
    }
}

/// The SPS array in a PMDK pool: the root object is the array itself.
pub struct PmdkPool<'a> {
    pmdk: &'a Pmdk,
    pool: *mut c_void,
    array: *mut u64,
    n: u64,
}

/// The pool layout name PMDK records and checks at open.
const LAYOUT: &CStr = c"pmlab-sps";

impl<'a> PmdkPool<'a> {
    /// Creates a pool file at `path` holding an SPS array of `n` entries, `a[i] = i`,
    /// made durable (PMDK's `pmemobj_persist`); not timed by the benchmark.
    pub fn create_sps(pmdk: &'a Pmdk, path: &Path, n: u64) -> Result<PmdkPool<'a>, PmdkError> {
        let c_path =
            CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| PmdkError::Call {
                what: "pool path",
                message: "contains a NUL byte".into(),
            })?;
        // PMDK's minimum pool is 8 MiB; leave room for its heap and lanes.
        let size = (16u64 << 20) + 2 * 8 * n;
        // SAFETY: valid C strings; PMDK creates the file (it must not exist).
        let pool = unsafe { (pmdk.create)(c_path.as_ptr(), LAYOUT.as_ptr(), size as usize, 0o600) };
        if pool.is_null() {
            return Err(pmdk.error("pmemobj_create"));
        }
        // SAFETY: `pool` is open; the root object is allocated zeroed on first use.
        let root = unsafe { (pmdk.root)(pool, (8 * n) as usize) };
        // SAFETY: a valid oid of this pool.
        let array = unsafe { (pmdk.direct)(root) } as *mut u64;
        if array.is_null() {
            // SAFETY: closing the pool we opened.
            unsafe { (pmdk.close)(pool) };
            return Err(pmdk.error("pmemobj_root"));
        }
        for i in 0..n {
            // SAFETY: the root object holds n u64 entries.
            unsafe { array.add(i as usize).write(i) };
        }
        // SAFETY: the array lies inside the pool.
        unsafe { (pmdk.persist)(pool, array as *const c_void, (8 * n) as usize) };
        Ok(PmdkPool {
            pmdk,
            pool,
            array,
            n,
        })
    }

    /// Whether PMDK treats the pool as persistent memory (flushes with CPU
    /// instructions rather than `msync`): libpmem's `pmem_is_pmem` on the array.
    pub fn is_pmem(&self) -> Option<bool> {
        let f = self.pmdk.is_pmem?;
        // SAFETY: the array is mapped for the pool's life.
        Some(unsafe { f(self.array as *const c_void, (8 * self.n) as usize) } != 0)
    }

    /// One SPS transaction with PMDK's API: swap entries `i` and `j`.
    pub fn swap(&mut self, i: u64, j: u64) -> Result<(), PmdkError> {
        let p = self.pmdk;
        debug_assert!(i < self.n && j < self.n);
        // SAFETY: the pool is open; no jump buffer (NULL), so PMDK reports failures by
        // return value and never longjmps over Rust frames; the parameter list ends
        // with TX_PARAM_NONE.
        if unsafe { (p.tx_begin)(self.pool, std::ptr::null_mut(), TX_PARAM_NONE) } != 0 {
            // SAFETY: ends the failed transaction (stage ONABORT) as TX_END would.
            unsafe { (p.tx_end)() };
            return Err(p.error("pmemobj_tx_begin"));
        }
        // SAFETY: both entries lie inside the root object; the transaction is open.
        let (ai, aj) = unsafe { (self.array.add(i as usize), self.array.add(j as usize)) };
        let added = unsafe {
            (p.tx_add_range_direct)(ai as *const c_void, 8) == 0
                && (p.tx_add_range_direct)(aj as *const c_void, 8) == 0
        };
        if !added {
            let e = p.error("pmemobj_tx_add_range_direct");
            // SAFETY: aborts and ends the open transaction.
            unsafe {
                (p.tx_abort)(libc_eio());
                (p.tx_end)();
            }
            return Err(e);
        }
        // SAFETY: the ranges are snapshotted; plain stores inside the transaction.
        unsafe {
            let (x, y) = (ai.read(), aj.read());
            ai.write(y);
            aj.write(x);
            (p.tx_commit)();
        }
        // SAFETY: ends the committed transaction.
        if unsafe { (p.tx_end)() } != 0 {
            return Err(p.error("pmemobj_tx_end"));
        }
        Ok(())
    }

    /// Whether the array is still a permutation of `0..n` (PMDK's side checked by the
    /// same invariant as pmlab's SPS).
    pub fn is_permutation(&self) -> bool {
        let mut seen = vec![false; self.n as usize];
        (0..self.n).all(|i| {
            // SAFETY: inside the root object.
            let v = unsafe { self.array.add(i as usize).read() };
            v < self.n && !std::mem::replace(&mut seen[v as usize], true)
        })
    }

    /// Opens a pool made by [`PmdkPool::create_sps`] again (to show it survived).
    pub fn reopen_check(pmdk: &Pmdk, path: &Path) -> Result<(), PmdkError> {
        let c_path =
            CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| PmdkError::Call {
                what: "pool path",
                message: "contains a NUL byte".into(),
            })?;
        // SAFETY: valid C strings.
        let pool = unsafe { (pmdk.open)(c_path.as_ptr(), LAYOUT.as_ptr()) };
        if pool.is_null() {
            return Err(pmdk.error("pmemobj_open"));
        }
        // SAFETY: closing what we opened.
        unsafe { (pmdk.close)(pool) };
        Ok(())
    }
}

impl Drop for PmdkPool<'_> {
    fn drop(&mut self) {
        // SAFETY: the pool was opened by create_sps and is closed once.
        unsafe { (self.pmdk.close)(self.pool) };
    }
}

/// `EIO`, PMDK's conventional abort code.
fn libc_eio() -> c_int {
    5
}
