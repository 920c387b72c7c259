//! Page images in volatile memory, shared copy-on-write and recycled.
//!
//! libFS and the service build, read and drop thousands of 4 KiB images a second (a
//! check's clean pages, an overlay's changed ones, a radix node being edited). Handed
//! straight back to the allocator, freed images let it shrink its heap, and the next
//! images fault fresh zeroed pages in from the kernel: a file server's iteration spent
//! a third of libFS's time in those faults. Freed images are therefore kept and new
//! ones taken from them first.
//!
//! Each thread keeps a few images of its own (no lock on the way), and hands a batch to
//! one pool the process shares when it holds too many, or takes one from it when it has
//! none. A pool per thread alone failed with many threads: the thread that drops an
//! overlay (the one whose fsync waited for its batch) collected all its images while
//! the others faulted fresh ones in, and with FileBench's 50 fileserver threads those
//! faults were a sixth of all CPU time.
//!
//! The pools keep what the process once held at the same time and no more (an image
//! is kept only after it was freed), so their bounds only cap the memory kept after a
//! one-off peak. Set below that peak, they threw images away that the next operations
//! faulted back in (see [`POOL_PAGES`]).

use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

use crate::media::{BODY, le};
use crate::place::PAGE;

type Image = Arc<[u8; PAGE as usize]>;

/// Images the shared pool keeps (128 MiB at most, and only as many as were freed):
/// four libFS overlays at their bound (`client::state`), all freed at once when the
/// service has applied them, besides the images of the pages a check read clean and
/// of the radix nodes cached. A FileBench fileserver of 10,000 files by 50 threads
/// holds some 16,200 images at its peak (as the fileset is made); with the bound at
/// one overlay (8,192), the pool threw away 14,720 images over 10,000 iterations and
/// the next operations faulted them back in, 1.4 page faults an iteration, each a
/// fresh page cleared by the kernel. With this bound it threw away none and made 304
/// images anew, and the run took 0.5 page faults an iteration (the rest are the
/// allocator's own, for other sizes).
const POOL_PAGES: usize = 32_768;

/// Images a thread keeps to itself before it hands a batch to the shared pool: about
/// what the service's handling of a batch takes, so that the service, which frees as
/// many images as it takes, seldom needs the shared pool. At 64 (batches of 32) the
/// service's images went through the shared pool to KVFS's 100 webproxy threads, each
/// keeping a batch, and the service made 2,400 new images in 3,000 iterations (400 at
/// 256); page faults went from 0.9 to 1.7 an iteration.
const LOCAL_PAGES: usize = 256;

/// Images moved between a thread and the shared pool at once (one lock per batch).
const BATCH: usize = 128;

thread_local! {
    static LOCAL: RefCell<Vec<Image>> = const { RefCell::new(Vec::new()) };
}

static SHARED: Mutex<Vec<Image>> = Mutex::new(Vec::new());

fn shared() -> std::sync::MutexGuard<'static, Vec<Image>> {
    // Every change of the pool is one `Vec` operation: a panic leaves it consistent.
    SHARED.lock().unwrap_or_else(|e| e.into_inner())
}

/// A kept image, if there is one: this thread's, or a batch taken from the shared pool.
fn recycled() -> Option<Image> {
    LOCAL.with(|p| {
        let mut p = p.borrow_mut();
        if p.is_empty() {
            let mut s = shared();
            let from = s.len().saturating_sub(BATCH);
            p.extend(s.drain(from..));
        }
        p.pop()
    })
}

/// Keeps a freed image (which no one else holds) for reuse.
fn keep(image: Image) {
    // A thread that is exiting has no pool left: the image is simply freed.
    let _ = LOCAL.try_with(|p| {
        let mut p = p.borrow_mut();
        p.push(image);
        if p.len() > LOCAL_PAGES {
            let rest = p.len() - BATCH;
            let batch = p.split_off(rest);
            let mut s = shared();
            if s.len() < POOL_PAGES {
                s.extend(batch);
            }
        }
    });
}

/// An image no one else holds, with whatever bytes it had: the caller overwrites it.
fn recycled_or_new() -> Image {
    recycled().unwrap_or_else(|| Arc::new([0u8; PAGE as usize]))
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
    match recycled() {
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
            keep(image);
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

    /// Held by the tests that follow images through the shared pool: each would take
    /// the other's images as its own.
    static POOL_TESTS: Mutex<()> = Mutex::new(());

    fn pool_to_myself() -> std::sync::MutexGuard<'static, ()> {
        POOL_TESTS.lock().unwrap_or_else(|e| e.into_inner())
    }

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

    /// A peak of images above one overlay's bound is kept whole once freed and taken
    /// again by another thread: with the shared pool bounded at one overlay (8,192
    /// images) half of them were thrown away and made anew (page faults) when the
    /// operations after the peak needed as many.
    #[test]
    fn a_peak_freed_at_once_is_reused_whole() {
        const PEAK: usize = 16_384;
        let _pool = pool_to_myself();
        let freed = std::thread::spawn(|| {
            let images: Vec<PageBuf> = (0..PEAK).map(|_| zero_page()).collect();
            let at: std::collections::HashSet<usize> =
                images.iter().map(|p| p.as_ptr() as usize).collect();
            drop(images);
            at
        })
        .join()
        .unwrap();
        let taken: Vec<PageBuf> = (0..PEAK).map(|_| zero_page()).collect();
        let reused = taken
            .iter()
            .filter(|p| freed.contains(&(p.as_ptr() as usize)))
            .count();
        // Other tests of this binary may take a few of them meanwhile.
        assert!(
            reused >= PEAK * 7 / 8,
            "only {reused} of {PEAK} images freed at once were reused"
        );
    }

    /// Images one thread frees are taken by another (through the shared pool) while
    /// the first thread still runs: a pool per thread alone kept them with the thread
    /// that freed them, and the other faulted fresh memory in.
    #[test]
    fn images_freed_on_one_thread_are_reused_on_another() {
        let _pool = pool_to_myself();
        let (freed_tx, freed_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let freer = std::thread::spawn(move || {
            let images: Vec<PageBuf> = (0..2 * LOCAL_PAGES).map(|_| zero_page()).collect();
            let at: std::collections::HashSet<usize> =
                images.iter().map(|p| p.as_ptr() as usize).collect();
            drop(images);
            freed_tx.send(at).unwrap();
            // Alive until the other thread has taken its images.
            done_rx.recv().unwrap();
        });
        let freed = freed_rx.recv().unwrap();
        let taken: Vec<PageBuf> = (0..2 * LOCAL_PAGES).map(|_| zero_page()).collect();
        let reused = taken
            .iter()
            .filter(|p| freed.contains(&(p.as_ptr() as usize)))
            .count();
        done_tx.send(()).unwrap();
        freer.join().unwrap();
        assert!(
            reused > 0,
            "no image another thread freed was reused ({} taken)",
            taken.len()
        );
    }
}
