//! Page images in volatile memory, shared copy-on-write and recycled per thread.
//!
//! libFS and the service build, read and drop thousands of 4 KiB images a second (a
//! check's clean pages, an overlay's changed ones, a radix node being edited). Handed
//! straight back to the allocator, freed images let it shrink its heap, and the next
//! images fault fresh zeroed pages in from the kernel: a file server's iteration spent
//! a third of libFS's time in those faults. Each thread therefore keeps the images it
//! frees, up to a bound, and takes new ones from them first.

use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use crate::media::{BODY, le};
use crate::place::PAGE;

type Image = Arc<[u8; PAGE as usize]>;

/// Images a thread keeps for reuse (32 MiB at most, and only as many as it freed):
/// as many as a libFS overlay may hold between ships, all freed at once when the
/// service has applied them (`client::state`'s bound on the overlay).
const POOL_PAGES: usize = 8192;

thread_local! {
    static POOL: RefCell<Vec<Image>> = const { RefCell::new(Vec::new()) };
}

/// An image no one else holds, with whatever bytes it had: the caller overwrites it.
fn recycled_or_new() -> Image {
    POOL.with(|p| p.borrow_mut().pop())
        .unwrap_or_else(|| Arc::new([0u8; PAGE as usize]))
}

/// A page image in volatile memory, shared copy-on-write.
///
/// Metadata code hands page images around by value: a transaction's clean pages, a
/// client's overlay, the cache of radix nodes, the view a check reads through. Most of
/// those hands only read, so a clone shares the image and the first write through
/// [`DerefMut`](std::ops::DerefMut) copies it if someone else still holds it: an
/// operation that reads ten pages and changes two copies two pages, not twelve.
#[derive(PartialEq, Eq)]
pub struct PageBuf(ManuallyDrop<Image>);

impl PageBuf {
    /// An image whose bytes are unspecified (left from an earlier page): for callers
    /// that overwrite all of it, such as a whole-page read.
    pub fn to_overwrite() -> PageBuf {
        PageBuf(ManuallyDrop::new(recycled_or_new()))
    }
}

/// A zero-filled page image: a recycled one cleared, or a new one, zeroed as it is
/// made (clearing it once more was a second 4 KiB store per new metadata page).
pub fn zero_page() -> PageBuf {
    match POOL.with(|p| p.borrow_mut().pop()) {
        Some(mut img) => {
            Arc::get_mut(&mut img)
                .expect("a recycled image has one holder")
                .fill(0);
            PageBuf(ManuallyDrop::new(img))
        }
        None => PageBuf(ManuallyDrop::new(Arc::new([0u8; PAGE as usize]))),
    }
}

impl Clone for PageBuf {
    fn clone(&self) -> Self {
        PageBuf(ManuallyDrop::new(Arc::clone(&self.0)))
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: `self.0` is taken once, here, and never touched again.
        let mut image = unsafe { ManuallyDrop::take(&mut self.0) };
        // Most images dropped are clones still shared: one load tells, before the
        // exclusive check's atomic read-modify-writes.
        if Arc::strong_count(&image) == 1 && Arc::get_mut(&mut image).is_some() {
            // A thread that is exiting has no pool left: the image is simply freed.
            let _ = POOL.try_with(|p| {
                let mut p = p.borrow_mut();
                if p.len() < POOL_PAGES {
                    p.push(image);
                }
            });
        }
    }
}

impl std::fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PageBuf(tag {:#x})", le::u32_at(&self.0[..], BODY + 4))
    }
}

impl std::ops::Deref for PageBuf {
    type Target = [u8; PAGE as usize];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut Self::Target {
        if Arc::strong_count(&self.0) != 1 || Arc::get_mut(&mut self.0).is_none() {
            // Shared: this holder's copy is written from here on.
            let mut own = PageBuf::to_overwrite();
            Arc::get_mut(&mut own.0)
                .expect("a recycled or new image has one holder")
                .copy_from_slice(&self.0[..]);
            *self = own;
        }
        // SAFETY: the image has one holder, this one (checked above, or a recycled or
        // new image), and no weak references (PageBuf makes none); `&mut self` keeps
        // it so while the borrow lives. Asking `Arc::get_mut` a second time would be a
        // second atomic compare-and-swap on every write of a page in a transaction.
        unsafe { &mut *(Arc::as_ptr(&self.0) as *mut [u8; PAGE as usize]) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writing through one holder never shows in another's image, recycled images
    /// come back zeroed from `zero_page`, and an image still held is not recycled.
    #[test]
    fn copy_on_write_and_recycling_keep_images_apart() {
        let mut a = zero_page();
        a[0] = 7;
        let mut b = a.clone();
        b[1] = 9;
        assert_eq!((a[0], a[1]), (7, 0));
        assert_eq!((b[0], b[1]), (7, 9));
        let kept = a.clone();
        drop(a);
        drop(b);
        for _ in 0..4 {
            let z = zero_page();
            assert!(
                z.iter().all(|&x| x == 0),
                "a recycled image came back dirty"
            );
        }
        assert_eq!((kept[0], kept[1]), (7, 0), "a held image was recycled");
    }
}
