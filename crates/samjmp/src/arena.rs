//! The arena the structure is built in, and how its references are resolved.
//!
//! One generic implementation serves both versions of the paper's comparison
//! (Figure 12): [`Pointers`] stores real addresses and dereferences them as they are
//! (a VAS segment is mapped at the same address in every process), [`Offsets`] stores
//! offsets from the mapping's start and adds the base on every dereference (an
//! `mmap`ed file lands wherever the kernel puts it: region-based programming).

use crate::error::SamError;
use crate::layout::{MAGIC, Ref, Root};

/// How stored references map to addresses in this process.
pub trait Addressing: Copy {
    /// The stored form of the arena byte at `off`.
    fn to_ref(self, off: u64) -> Ref;
    /// The address a stored reference names.
    fn ptr(self, r: Ref) -> *mut u8;
}

/// References are virtual addresses (the VAS version).
#[derive(Clone, Copy, Debug)]
pub struct Pointers {
    /// The arena's fixed address.
    pub base: u64,
}

impl Addressing for Pointers {
    #[inline(always)]
    fn to_ref(self, off: u64) -> Ref {
        self.base + off
    }
    #[inline(always)]
    fn ptr(self, r: Ref) -> *mut u8 {
        r as *mut u8
    }
}

/// References are offsets from the mapping's start (the mmap version).
#[derive(Clone, Copy, Debug)]
pub struct Offsets {
    /// Where the region happens to be mapped in this process.
    pub base: *mut u8,
}

impl Addressing for Offsets {
    #[inline(always)]
    fn to_ref(self, off: u64) -> Ref {
        off
    }
    #[inline(always)]
    fn ptr(self, r: Ref) -> *mut u8 {
        // SAFETY of later use: `r` was produced by `to_ref` inside the arena.
        self.base.wrapping_add(r as usize)
    }
}

/// An arena of `size` bytes at `base`, holding a [`Root`] at its start.
///
/// The caller guarantees the memory is mapped read-write (a switched-in VAS, a
/// mapped file) for the arena's lifetime.
pub struct Arena<A: Addressing> {
    a: A,
    base: *mut u8,
    size: u64,
    /// What errors call it (a VAS, a file).
    label: String,
}

fn align_up(x: u64, a: u64) -> u64 {
    (x + a - 1) & !(a - 1)
}

/// Whether `x` is a multiple of `a`, a power of two.
#[inline(always)]
fn aligned(x: u64, a: u64) -> bool {
    x & (a - 1) == 0
}

impl<A: Addressing> Arena<A> {
    /// An arena over `size` bytes at `base`, addressed by `a`.
    ///
    /// # Safety
    /// `base..base + size` must be mapped read-write and 8-byte aligned for as long
    /// as the arena and anything borrowed from it live; `a` must resolve the arena's
    /// references to that range.
    pub unsafe fn new(a: A, base: *mut u8, size: u64) -> Self {
        Arena {
            a,
            base,
            size,
            label: "arena".into(),
        }
    }

    /// Names the arena in errors (`VAS NAME`, a file's path).
    pub fn set_label(&mut self, label: impl Into<String>) {
        self.label = label.into();
    }

    /// What errors call the arena.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The address of the arena's first byte.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// The addressing.
    pub fn addressing(&self) -> A {
        self.a
    }

    /// Bytes in the arena.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Starts a new structure: a zeroed root.
    pub fn init(&mut self) -> Result<(), SamError> {
        if self.size < 4096 {
            return Err(SamError::Full {
                size: self.size,
                wanted: 4096,
            });
        }
        let root = Root {
            magic: MAGIC,
            size: self.size,
            used: align_up(std::mem::size_of::<Root>() as u64, 64),
            ..Root::default()
        };
        // SAFETY: the arena is mapped read-write and holds at least a page.
        unsafe { self.base.cast::<Root>().write(root) };
        Ok(())
    }

    /// Checks that the arena holds a complete structure of this layout, and that every
    /// table the root names lies inside it (records and their parts are checked as
    /// they are reached: see `access`).
    pub fn validate(&self, what: &str) -> Result<(), SamError> {
        let bad = |problem: String| SamError::Format {
            what: what.to_string(),
            problem,
        };
        if self.size < std::mem::size_of::<Root>() as u64 {
            return Err(bad(format!("{} bytes is too small", self.size)));
        }
        let r = self.root();
        if r.magic != MAGIC {
            return Err(bad(
                "does not hold loaded alignments (no PMLSAM02 root)".into()
            ));
        }
        if r.size != self.size || r.used > r.size {
            return Err(bad(format!(
                "root says {} bytes ({} used), the mapping has {}",
                r.size, r.used, self.size
            )));
        }
        if r.complete != 1 {
            return Err(bad("its load did not finish".into()));
        }
        self.check_root()
    }

    /// Whether `len` bytes at reference `r` lie inside the arena, aligned to `align`.
    #[inline(always)]
    pub fn holds(&self, r: Ref, len: u64, align: u64) -> bool {
        let p = self.a.ptr(r) as u64;
        let b = self.base as u64;
        p >= b && aligned(p, align) && p.checked_add(len).is_some_and(|e| e <= b + self.size)
    }

    /// The root.
    pub fn root(&self) -> &Root {
        // SAFETY: the arena starts with a root (init or validate).
        unsafe { &*self.base.cast::<Root>() }
    }

    /// The root, to publish results in.
    pub fn root_mut(&mut self) -> &mut Root {
        // SAFETY: as `root`; `&mut self` makes it exclusive in this process.
        unsafe { &mut *self.base.cast::<Root>() }
    }

    /// `bytes` more, aligned to `align` (a power of two): the new block's reference.
    pub fn alloc(&mut self, bytes: u64, align: u64) -> Result<Ref, SamError> {
        crate::crash::point();
        let used = self.root().used;
        let off = align_up(used, align);
        let end = off.checked_add(bytes).filter(|&e| e <= self.size);
        let Some(end) = end else {
            return Err(SamError::Full {
                size: self.size,
                wanted: off.saturating_add(bytes),
            });
        };
        self.root_mut().used = end;
        Ok(self.a.to_ref(off))
    }

    /// Copies `bytes` into the arena.
    pub fn put_bytes(&mut self, bytes: &[u8]) -> Result<Ref, SamError> {
        let r = self.alloc(bytes.len() as u64, 1)?;
        // SAFETY: `alloc` returned room for `bytes.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.a.ptr(r), bytes.len());
        }
        Ok(r)
    }

    /// Copies a slice of plain values into the arena.
    pub fn put_slice<T: Copy>(&mut self, items: &[T]) -> Result<Ref, SamError> {
        let bytes = std::mem::size_of_val(items) as u64;
        let r = self.alloc(bytes, std::mem::align_of::<T>().max(8) as u64)?;
        // SAFETY: room and alignment for `items.len()` values of `T`.
        unsafe {
            std::ptr::copy_nonoverlapping(items.as_ptr(), self.a.ptr(r).cast::<T>(), items.len());
        }
        Ok(r)
    }

    /// Stores one value.
    pub fn put<T: Copy>(&mut self, v: T) -> Result<Ref, SamError> {
        self.put_slice(std::slice::from_ref(&v))
    }

    /// The value a reference names.
    ///
    /// # Safety
    /// `r` must name a `T` stored in this arena.
    #[inline(always)]
    pub unsafe fn get<T>(&self, r: Ref) -> &T {
        // SAFETY: the caller's guarantee.
        unsafe { &*self.a.ptr(r).cast::<T>() }
    }

    /// `n` values at `r`.
    ///
    /// # Safety
    /// `r` must name `n` consecutive `T`s stored in this arena (or `n == 0`).
    #[inline(always)]
    pub unsafe fn slice<T>(&self, r: Ref, n: u64) -> &[T] {
        if n == 0 {
            return &[];
        }
        // SAFETY: the caller's guarantee.
        unsafe { std::slice::from_raw_parts(self.a.ptr(r).cast::<T>(), n as usize) }
    }
}
