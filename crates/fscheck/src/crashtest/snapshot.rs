//! What the crash oracle compares: the namespace and every object's attributes.
//!
//! A snapshot is read from a metadata space (a recovered crash image, or the live volume)
//! or built by the workload's own model of what its batches did. Two snapshots are equal
//! exactly when every path names the same inode with the same kind, link count, size,
//! permission bits, domain and file page mapping; a batch that is half visible differs
//! from both its before and after states in at least one of these.

use std::collections::BTreeMap;

use pmlab_fs::dir;
use pmlab_fs::error::{FsError, Location, Result};
use pmlab_fs::inode::Kind;
use pmlab_fs::layout::ROOT_INO;
use pmlab_fs::media::MediaRead;
use pmlab_fs::radix;
use pmlab_fs::view::{MediaView, PageSource};
use pmlab_spine::{Addr, SpineError, check_bounds};

/// One path and the object it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The inode the path names.
    pub ino: u64,
    /// File or directory.
    pub kind: Kind,
    /// Names referring to the object.
    pub nlink: u32,
    /// Bytes of a file; entries of a directory.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Permission domain of a file's data (0 for directories).
    pub domain: u16,
    /// A file's mapped pages: (file page index, data page), ascending; a KVFS object's
    /// extent as (0, its first page).
    pub pages: Vec<(u64, u64)>,
}

/// Every path from the root ("/", "/d3/f7") and what it names.
pub type Snapshot = BTreeMap<String, Entry>;

/// A crash image or a volume's current contents as a read-only metadata space.
pub struct ImageRead<'a>(pub &'a [u8]);

impl MediaRead for ImageRead<'_> {
    fn media_size(&self) -> u64 {
        self.0.len() as u64
    }
    fn media_read(&mut self, addr: Addr, buf: &mut [u8]) -> std::result::Result<(), SpineError> {
        check_bounds(addr, buf.len() as u64, self.0.len() as u64)?;
        buf.copy_from_slice(&self.0[addr as usize..addr as usize + buf.len()]);
        Ok(())
    }
}

/// Reads the namespace of the volume in `mem`. Damage is an error; a directory reached
/// twice (a cycle, or a second name) is reported as corruption rather than followed.
pub fn read<R: MediaRead + ?Sized>(mem: &mut R) -> Result<Snapshot> {
    let mut view = MediaView::new(mem)?;
    let mut out = Snapshot::new();
    let mut dirs_seen = std::collections::BTreeSet::new();
    let mut stack = vec![("/".to_string(), ROOT_INO)];
    while let Some((path, ino)) = stack.pop() {
        let i = view.inode(ino)?;
        let mut pages = Vec::new();
        match i.kind {
            Kind::Dir => {
                if !dirs_seen.insert(ino) {
                    return Err(cycle(ino));
                }
                let (entries, _) = dir::entries(&mut view, i.root)?;
                for (name, child) in entries {
                    let cpath = if path == "/" {
                        format!("/{name}")
                    } else {
                        format!("{path}/{name}")
                    };
                    stack.push((cpath, child));
                }
            }
            Kind::File => {
                radix::walk(&mut view, &i, &mut |ix, p| pages.push((ix, p)), &mut |_| {})?
            }
            // A KVFS object is one extent: its first page stands for it.
            Kind::Kv if i.root != 0 => pages.push((0, i.root)),
            _ => {}
        }
        let e = Entry {
            ino,
            kind: i.kind,
            nlink: i.nlink,
            size: i.size,
            mode: i.mode,
            domain: if i.kind == Kind::Dir { 0 } else { i.domain },
            pages,
        };
        out.insert(path, e);
    }
    Ok(out)
}

fn cycle(ino: u64) -> FsError {
    FsError::Corrupt {
        what: "directory tree",
        at: Location { page: 0, offset: 0 },
        why: format!("inode {ino} is reached twice: the tree has a cycle"),
    }
}

/// The first difference between `got` and `want`, for failure messages.
pub fn first_difference(got: &Snapshot, want: &Snapshot) -> Option<String> {
    for (path, w) in want {
        match got.get(path) {
            None => return Some(format!("{path} is missing")),
            Some(g) if g != w => return Some(format!("{path} is {g:?}, expected {w:?}")),
            _ => {}
        }
    }
    got.keys()
        .find(|p| !want.contains_key(*p))
        .map(|p| format!("{p} should not exist"))
}
