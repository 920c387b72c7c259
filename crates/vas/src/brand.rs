//! SpaceJMP's safety rules for pointers (§3.3), enforced by Rust's types where the
//! paper used a compiler pass (§4.3), with an explicit cast to escape them and a
//! checked mode that catches the rest at run time.
//!
//! The rules, and how each is enforced here:
//!
//! 1. A pointer obtained while VAS `v` is active (by allocation in, or loading from, its
//!    non-common region) may be dereferenced only while `v` is active. [`enter`] runs a
//!    closure with an [`Active<'v>`] whose lifetime `'v` is fresh for each call (a
//!    *brand*); a [`VPtr<'v, ..>`] is dereferenced only with an `&Active<'v>` of the same
//!    brand. A pointer of another VAS has another brand and does not type-check;
//!    switching away ([`Active::switch`]) borrows the token mutably, so no pointer of `v`
//!    can be dereferenced until the switch returns; and no pointer can leave the closure.
//! 2. Storing a pointer `q` through `p` is safe only if `q` points into `v`'s
//!    non-common region, and a global segment (seen by every process) may not hold a
//!    pointer into a process-private one. A value stored in a segment of region `R` must
//!    implement [`PersistIn<R>`]: plain data does, [`SegPtr<U, Global>`] does in both
//!    regions, [`SegPtr<U, Private>`] only in [`Private`]. References (`&T`, pointers into
//!    the common region) implement neither, so they cannot be stored in a segment at all.
//! 3. A pointer loaded from a segment ([`VPtr::load_ptr`]) is valid in the active VAS
//!    and gets its brand; pointers to the stack and globals are ordinary references,
//!    always safe.
//!
//! [`VPtr::vcast`] is the paper's `vcast`: an `unsafe` re-branding. [`Checked`] is the
//! dynamic mode: a pointer that carries its VAS and region as values and checks them on
//! every use, for code whose VAS is not known statically (the paper's inserted checks).

use std::marker::PhantomData;

use crate::api::{SegId, SpaceJmp, VasHandle};
use crate::error::VasError;
use crate::native::NativeSpaces;

/// A global segment: visible to every process that attaches its VAS.
#[derive(Debug, Clone, Copy)]
pub enum Global {}
/// A process-private segment (a scratch heap, §5.3): visible to this process only.
#[derive(Debug, Clone, Copy)]
pub enum Private {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Global {}
    impl Sealed for super::Private {}
}

/// A region of a VAS: [`Global`] or [`Private`].
pub trait Region: sealed::Sealed + 'static {
    /// Whether the region is process-private.
    const PRIVATE: bool;
}
impl Region for Global {
    const PRIVATE: bool = false;
}
impl Region for Private {
    const PRIVATE: bool = true;
}

/// Values that may be stored in a segment of region `R`.
///
/// # Safety
/// An implementation for a struct promises that every field is `PersistIn<R>`, so that
/// the struct holds no reference and no pointer a process attaching `R` could not follow.
pub unsafe trait PersistIn<R: Region>: Copy {}

macro_rules! plain {
    ($($t:ty),*) => {$(
        // SAFETY: plain data holds no pointer.
        unsafe impl<R: Region> PersistIn<R> for $t {}
    )*};
}
plain!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    bool,
    ()
);
// SAFETY: an array of storable values is storable.
unsafe impl<R: Region, T: PersistIn<R>, const N: usize> PersistIn<R> for [T; N] {}

/// A pointer as stored inside a segment: the fixed virtual address of a `T` in region
/// `R`, meaningful in every process that attaches the segment (its address is the same
/// everywhere).
#[repr(transparent)]
pub struct SegPtr<T, R: Region> {
    addr: u64,
    _to: PhantomData<(*const T, R)>,
}

impl<T, R: Region> Clone for SegPtr<T, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, R: Region> Copy for SegPtr<T, R> {}

impl<T, R: Region> std::fmt::Debug for SegPtr<T, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SegPtr({:#x})", self.addr)
    }
}

impl<T, R: Region> SegPtr<T, R> {
    /// The null pointer.
    pub const NULL: Self = SegPtr {
        addr: 0,
        _to: PhantomData,
    };

    /// The address.
    pub fn addr(self) -> u64 {
        self.addr
    }

    /// Whether it is null.
    pub fn is_null(self) -> bool {
        self.addr == 0
    }
}

// SAFETY: a pointer into a global segment is meaningful to every process of the VAS.
unsafe impl<T, R: Region> PersistIn<R> for SegPtr<T, Global> {}
// SAFETY: a private pointer may be kept in the same process's private segments.
unsafe impl<T> PersistIn<Private> for SegPtr<T, Private> {}

/// An invariant lifetime: the brand of one [`enter`] (neither longer nor shorter
/// lifetimes convert to it, so two brands never unify).
type Brand<'v> = PhantomData<fn(&'v ()) -> &'v ()>;

/// The token of an active VAS, branded with the fresh lifetime `'v` of one [`enter`].
pub struct Active<'v> {
    spaces: *mut NativeSpaces,
    vh: VasHandle,
    _brand: Brand<'v>,
}

/// A pointer into the non-common region `R` of the VAS branded `'v`.
pub struct VPtr<'v, T, R: Region> {
    ptr: *mut T,
    _brand: Brand<'v>,
    _region: PhantomData<R>,
}

impl<T, R: Region> Clone for VPtr<'_, T, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, R: Region> Copy for VPtr<'_, T, R> {}

/// Switches into `vh`, runs `f` with its branded token, and switches back to where the
/// process was (its previous VAS, or home).
pub fn enter<T>(
    spaces: &mut NativeSpaces,
    vh: VasHandle,
    f: impl for<'v> FnOnce(&mut Active<'v>) -> T,
) -> Result<T, VasError> {
    let prev = spaces.current();
    spaces.vas_switch(vh)?;
    let mut act = Active {
        spaces,
        vh,
        _brand: PhantomData,
    };
    let out = f(&mut act);
    match prev {
        Some(p) => spaces.vas_switch(p).map(|_| ())?,
        None => spaces.vas_switch_home()?,
    }
    Ok(out)
}

impl<'v> Active<'v> {
    fn spaces(&self) -> &NativeSpaces {
        // SAFETY: `enter` holds the exclusive borrow of the spaces for the token's life.
        unsafe { &*self.spaces }
    }

    /// The handle that is active.
    pub fn handle(&self) -> VasHandle {
        self.vh
    }

    fn at<T, R: Region>(&self, sid: SegId, offset: u64) -> Result<VPtr<'v, T, R>, VasError> {
        let s = self.spaces();
        let info = s.seg_describe(sid)?;
        if info.private != R::PRIVATE {
            return Err(VasError::Invalid {
                field: "segment",
                problem: format!(
                    "{} is {} but a {} pointer was asked for",
                    info.name,
                    if info.private { "private" } else { "global" },
                    if R::PRIVATE { "private" } else { "global" }
                ),
            });
        }
        if s.active_access(sid).is_none() {
            return Err(VasError::Refused(format!(
                "segment {} is not in the active VAS",
                info.name
            )));
        }
        let size = std::mem::size_of::<T>() as u64;
        let align = std::mem::align_of::<T>() as u64;
        if offset.checked_add(size).is_none_or(|e| e > info.size) || offset % align != 0 {
            return Err(VasError::Invalid {
                field: "offset",
                problem: format!("{offset} for a {size}-byte value in {}", info.name),
            });
        }
        Ok(VPtr {
            ptr: (info.base + offset) as *mut T,
            _brand: PhantomData,
            _region: PhantomData,
        })
    }

    /// A pointer to the `T` at `offset` in global segment `sid` of the active VAS.
    pub fn global<T>(&self, sid: SegId, offset: u64) -> Result<VPtr<'v, T, Global>, VasError> {
        self.at(sid, offset)
    }

    /// A pointer to the `T` at `offset` in private segment `sid` of the active VAS.
    pub fn private<T>(&self, sid: SegId, offset: u64) -> Result<VPtr<'v, T, Private>, VasError> {
        self.at(sid, offset)
    }

    /// Switches to `vh` for the duration of `f`, then back into this VAS. While `f`
    /// runs this token is mutably borrowed, so this VAS's pointers cannot be used.
    pub fn switch<T>(
        &mut self,
        vh: VasHandle,
        f: impl for<'w> FnOnce(&mut Active<'w>) -> T,
    ) -> Result<T, VasError> {
        // SAFETY: the exclusive borrow `enter` took is still held through `self`.
        let spaces = unsafe { &mut *self.spaces };
        enter(spaces, vh, f)
    }
}

impl<'v, T: Copy, R: Region> VPtr<'v, T, R> {
    /// Reads the value (rule 1: only while `'v` is active).
    pub fn get(self, _active: &Active<'v>) -> T {
        // SAFETY: the brand proves the VAS holding the pointee is active, and `at`
        // checked bounds and alignment.
        unsafe { self.ptr.read() }
    }

    /// Writes a value storable in `R` (rules 1 and 2).
    pub fn set(self, _active: &Active<'v>, value: T)
    where
        T: PersistIn<R>,
    {
        // SAFETY: as for `get`; a read-only attachment faults (the kernel's check).
        unsafe { self.ptr.write(value) }
    }
}

impl<'v, T, R: Region> VPtr<'v, T, R> {
    /// The `SegPtr` form of this pointer, to store in a segment.
    pub fn to_seg(self) -> SegPtr<T, R> {
        SegPtr {
            addr: self.ptr as u64,
            _to: PhantomData,
        }
    }

    /// The address.
    pub fn addr(self) -> u64 {
        self.ptr as u64
    }

    /// The pointer `count` elements further (bounds are the caller's: checked by
    /// [`Active::global`] only for the first).
    ///
    /// # Safety
    /// The result must stay inside the same segment.
    pub unsafe fn add(self, count: usize) -> Self {
        VPtr {
            ptr: self.ptr.wrapping_add(count),
            _brand: PhantomData,
            _region: PhantomData,
        }
    }

    /// The paper's `vcast`: re-brands the pointer for another active VAS.
    ///
    /// # Safety
    /// The pointee must be mapped, at this address, in the VAS `to` stands for.
    pub unsafe fn vcast<'w>(self, _to: &Active<'w>) -> VPtr<'w, T, R> {
        VPtr {
            ptr: self.ptr,
            _brand: PhantomData,
            _region: PhantomData,
        }
    }
}

impl<'v, U, R: Region, S: Region> VPtr<'v, SegPtr<U, S>, R> {
    /// Loads a stored pointer (rule 3: it is valid in the active VAS).
    pub fn load_ptr(self, active: &Active<'v>) -> VPtr<'v, U, S> {
        VPtr {
            ptr: self.get(active).addr as *mut U,
            _brand: PhantomData,
            _region: PhantomData,
        }
    }

    /// Stores pointer `q`, which must be of this VAS (its brand) and storable in `R`.
    pub fn store_ptr(self, active: &Active<'v>, q: VPtr<'v, U, S>)
    where
        SegPtr<U, S>: PersistIn<R>,
    {
        self.set(active, q.to_seg());
    }
}

/// The dynamic check mode: a pointer that carries the handle of its VAS and whether it
/// points into a private segment, checked on every use.
#[derive(Clone, Copy, Debug)]
pub struct Checked<T> {
    addr: u64,
    vh: VasHandle,
    private: bool,
    _to: PhantomData<*const T>,
}

impl<T> Checked<T> {
    fn check(&self, spaces: &NativeSpaces) -> Result<(), VasError> {
        match spaces.current() {
            Some(vh) if vh == self.vh => Ok(()),
            other => Err(VasError::Refused(format!(
                "pointer {:#x} of VAS handle {} used while {} is active",
                self.addr,
                self.vh.0,
                other.map_or("home".into(), |h| format!("handle {}", h.0))
            ))),
        }
    }
}

impl<T: Copy> Checked<T> {
    /// A pointer to the `T` at `offset` of segment `sid`, in the VAS now active.
    pub fn at(spaces: &NativeSpaces, sid: SegId, offset: u64) -> Result<Self, VasError> {
        let vh = spaces
            .current()
            .ok_or_else(|| VasError::Refused("no VAS is active".into()))?;
        let info = spaces.seg_describe(sid)?;
        if spaces.active_access(sid).is_none()
            || offset + std::mem::size_of::<T>() as u64 > info.size
        {
            return Err(VasError::Refused(format!(
                "{} offset {offset} is not in the active VAS",
                info.name
            )));
        }
        Ok(Checked {
            addr: info.base + offset,
            vh,
            private: info.private,
            _to: PhantomData,
        })
    }

    /// Reads the value if this pointer's VAS is active.
    pub fn get(&self, spaces: &NativeSpaces) -> Result<T, VasError> {
        self.check(spaces)?;
        // SAFETY: the VAS holding the pointee is active and `at` checked bounds.
        Ok(unsafe { (self.addr as *const T).read_unaligned() })
    }

    /// Writes the value if this pointer's VAS is active.
    pub fn set(&self, spaces: &NativeSpaces, value: T) -> Result<(), VasError> {
        self.check(spaces)?;
        // SAFETY: as for `get`; a read-only mapping faults.
        unsafe { (self.addr as *mut T).write_unaligned(value) };
        Ok(())
    }

    /// Stores the address of `q` here: both must be of the active VAS, and a private
    /// pointer may not go into a global segment.
    pub fn store_ptr<U>(&self, spaces: &NativeSpaces, q: &Checked<U>) -> Result<(), VasError> {
        self.check(spaces)?;
        q.check(spaces)?;
        if q.private && !self.private {
            return Err(VasError::Refused(format!(
                "storing private pointer {:#x} into global segment at {:#x}",
                q.addr, self.addr
            )));
        }
        // SAFETY: the pointee is a u64-sized slot of the active VAS.
        unsafe { (self.addr as *mut u64).write_unaligned(q.addr) };
        Ok(())
    }
}
