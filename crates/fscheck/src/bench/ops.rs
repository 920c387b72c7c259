//! One file interface over PXFS and a kernel file system, so every benchmark runs the
//! same code against both: the POSIX calls FileBench's flowops and the paper's
//! microbenchmarks issue, and nothing more.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pmlab_fs::error::{FsError, Result};
use pmlab_fs::kvfs::Kvfs;
use pmlab_fs::pxfs::{Fd, OpenFlags, Pxfs};

/// An open file of a [`FileOps`] implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handle(pub u32);

/// The file calls the benchmarks issue. Paths are absolute within the file system
/// (`/dir/file`). Data calls move the file offset as POSIX `read`/`write` do.
pub trait FileOps {
    /// A short name for tables ("PXFS", "tmpfs", "ext4").
    fn name(&self) -> &str;
    /// Creates a directory.
    fn mkdir(&mut self, path: &str) -> Result<()>;
    /// Creates (or truncates) a file and opens it for writing.
    fn create(&mut self, path: &str) -> Result<Handle>;
    /// Opens an existing file for reading, or for writing (at the end if `append`).
    fn open(&mut self, path: &str, write: bool, append: bool) -> Result<Handle>;
    /// Reads at the file offset; 0 at the end of the file.
    fn read(&mut self, h: Handle, buf: &mut [u8]) -> Result<usize>;
    /// Reads at `off` without moving the offset.
    fn pread(&mut self, h: Handle, off: u64, buf: &mut [u8]) -> Result<usize>;
    /// Writes all of `data` at the file offset (at the end for an append handle).
    fn write(&mut self, h: Handle, data: &[u8]) -> Result<()>;
    /// Writes all of `data` at `off` without moving the offset.
    fn pwrite(&mut self, h: Handle, off: u64, data: &[u8]) -> Result<()>;
    /// Makes the file durable.
    fn fsync(&mut self, h: Handle) -> Result<()>;
    /// Closes a file.
    fn close(&mut self, h: Handle) -> Result<()>;
    /// Removes a file.
    fn unlink(&mut self, path: &str) -> Result<()>;
    /// The size of a file.
    fn stat(&mut self, path: &str) -> Result<u64>;
    /// Ships whatever the file system batches (PXFS's pending metadata operations), so
    /// a timed phase pays for all the work it caused.
    fn sync(&mut self) -> Result<()>;
    /// Lease revocations the file system's client answered so far (`None`: a file
    /// system without leases).
    fn revocations(&self) -> Option<u64> {
        None
    }
    /// Waits for work the file system does in the background on its own account that
    /// would compete with a timed phase for the cores (PXFS: the populating of the data
    /// spaces it mapped, SCM being present from the start). Nothing for a kernel file
    /// system.
    fn settle(&mut self) -> Result<()> {
        Ok(())
    }
}

/// A directory of a kernel file system (tmpfs, ext4...) through ordinary system calls.
pub struct KernelDir {
    name: String,
    root: PathBuf,
    files: HashMap<u32, File>,
    next: u32,
}

fn kio(path: &Path, e: std::io::Error) -> FsError {
    FsError::io(path.display().to_string(), e)
}

impl KernelDir {
    /// Uses the existing directory `root`, calling the file system `name` in tables.
    pub fn new(name: impl Into<String>, root: &Path) -> KernelDir {
        KernelDir {
            name: name.into(),
            root: root.to_path_buf(),
            files: HashMap::new(),
            next: 3,
        }
    }

    /// The directory the paths are relative to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    fn add(&mut self, f: File) -> Handle {
        let h = self.next;
        self.next += 1;
        self.files.insert(h, f);
        Handle(h)
    }

    fn file(&mut self, h: Handle) -> Result<&mut File> {
        self.files
            .get_mut(&h.0)
            .ok_or_else(|| FsError::BadHandle(format!("handle {} is not open", h.0)))
    }
}

impl FileOps for KernelDir {
    fn name(&self) -> &str {
        &self.name
    }
    fn mkdir(&mut self, path: &str) -> Result<()> {
        let p = self.path(path);
        std::fs::create_dir(&p).map_err(|e| kio(&p, e))
    }
    fn create(&mut self, path: &str) -> Result<Handle> {
        let p = self.path(path);
        let f = File::create(&p).map_err(|e| kio(&p, e))?;
        Ok(self.add(f))
    }
    fn open(&mut self, path: &str, write: bool, append: bool) -> Result<Handle> {
        let p = self.path(path);
        let f = OpenOptions::new()
            .read(true)
            .write(write && !append)
            .append(append)
            .open(&p)
            .map_err(|e| kio(&p, e))?;
        Ok(self.add(f))
    }
    fn read(&mut self, h: Handle, buf: &mut [u8]) -> Result<usize> {
        let root = self.root.clone();
        self.file(h)?.read(buf).map_err(|e| kio(&root, e))
    }
    fn pread(&mut self, h: Handle, off: u64, buf: &mut [u8]) -> Result<usize> {
        let root = self.root.clone();
        self.file(h)?.read_at(buf, off).map_err(|e| kio(&root, e))
    }
    fn write(&mut self, h: Handle, data: &[u8]) -> Result<()> {
        let root = self.root.clone();
        self.file(h)?.write_all(data).map_err(|e| kio(&root, e))
    }
    fn pwrite(&mut self, h: Handle, off: u64, data: &[u8]) -> Result<()> {
        let root = self.root.clone();
        self.file(h)?
            .write_all_at(data, off)
            .map_err(|e| kio(&root, e))
    }
    fn fsync(&mut self, h: Handle) -> Result<()> {
        let root = self.root.clone();
        self.file(h)?.sync_all().map_err(|e| kio(&root, e))
    }
    fn close(&mut self, h: Handle) -> Result<()> {
        self.files
            .remove(&h.0)
            .map(drop)
            .ok_or_else(|| FsError::BadHandle(format!("handle {} is not open", h.0)))
    }
    fn unlink(&mut self, path: &str) -> Result<()> {
        let p = self.path(path);
        std::fs::remove_file(&p).map_err(|e| kio(&p, e))
    }
    fn stat(&mut self, path: &str) -> Result<u64> {
        let p = self.path(path);
        Ok(std::fs::metadata(&p).map_err(|e| kio(&p, e))?.len())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

/// The geometry of a benchmark volume: room for `data_bytes` of file data, `inodes`
/// files and directories, and KVFS objects of `kv_object_bytes`.
#[derive(Clone, Copy, Debug)]
pub struct VolumeSize {
    /// Bytes of file data the volume must hold at once (with headroom added).
    pub data_bytes: u64,
    /// Files and directories.
    pub inodes: u64,
    /// Size of one KVFS object (rounded up to pages).
    pub kv_object_bytes: u64,
}

/// A PXFS mount (one libFS client) driven through [`FileOps`], or one thread's handle
/// on a mount it shares with the other threads of its process ([`PxfsMount::share`]).
pub struct PxfsMount {
    fs: Arc<Pxfs>,
    /// Whether this handle reports the mount's revocations (one handle per mount, so
    /// that threads sharing it do not count them once each).
    counts_revocations: bool,
}

impl PxfsMount {
    /// Mounts the volume served on `socket`.
    pub fn mount(socket: &Path) -> Result<PxfsMount> {
        Ok(PxfsMount {
            fs: Arc::new(Pxfs::mount(socket)?),
            counts_revocations: true,
        })
    }

    /// Another handle on the same mount, for another thread of the process: Aerie's
    /// libFS is mounted once by an application process (§3.1) and its threads share its
    /// leases, as an application's threads share one kernel mount. Each handle keeps
    /// its own open files ([`FileOps`] handles are per thread, like descriptors a
    /// thread opened).
    pub fn share(&self) -> PxfsMount {
        PxfsMount {
            fs: self.fs.clone(),
            counts_revocations: false,
        }
    }

    /// The PXFS mount.
    pub fn pxfs(&self) -> &Pxfs {
        &self.fs
    }
}

/// Refuses a volume of `bytes` that `scratch` has no room for. Its spaces are populated
/// whole when mapped (SCM is present from the start), so on a tmpfs one larger than the
/// room left is not refused by the kernel but fills the memory, and the run is killed
/// half-way by the out-of-memory killer, its volume left behind. A tmpfs's room is the
/// lesser of its free space and the memory available: a tmpfs may be as large as the
/// memory (Linux's /dev/shm is half of it by default, but need not be).
fn check_room(scratch: &Path, bytes: u64) -> Result<()> {
    let st = rustix::fs::statfs(scratch).map_err(|e| FsError::Io {
        what: format!("statfs {}", scratch.display()),
        source: e.into(),
    })?;
    let free = (st.f_bavail as u64).saturating_mul(st.f_frsize as u64);
    let memory = (st.f_type == TMPFS_MAGIC).then(memory_available).flatten();
    let room = free.min(memory.unwrap_or(u64::MAX));
    if bytes > room {
        let memory = memory.map_or(String::new(), |m| {
            format!(", {} MiB of memory available", m >> 20)
        });
        return Err(FsError::NoSpace(format!(
            "a benchmark volume of {} MiB does not fit in {} ({} MiB free{memory}): \
             run fewer iterations or files, or point the scratch directory elsewhere",
            bytes >> 20,
            scratch.display(),
            free >> 20,
        )));
    }
    Ok(())
}

/// `statfs`'s type of a tmpfs (linux/magic.h).
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// The memory the kernel says is available for new allocations without swapping
/// (`MemAvailable` in /proc/meminfo), in bytes.
fn memory_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// A fresh Aerie volume in a scratch directory, served from this process, with one
/// PXFS mount. The volume and the service go away on drop.
pub struct PxfsVolume {
    fs: Option<PxfsMount>,
    service: Option<pmlab_fs::service::Handle>,
    dir: PathBuf,
    socket: PathBuf,
}

impl PxfsVolume {
    /// Builds a volume under `scratch` (which must exist) and mounts it.
    pub fn create(scratch: &Path, size: VolumeSize) -> Result<PxfsVolume> {
        let page = pmlab_fs::media::PAGE;
        let data_pages = size.data_bytes.div_ceil(page);
        // Directory pages and radix index pages come from the metadata pool: a radix
        // page maps 512 data pages, every file of more than a page has at least one, and
        // a directory takes a root page plus a page per bucket in use (up to one per
        // entry), so three pages per inode cover a tree of small directories.
        let meta_pages = 4096 + data_pages / 256 + 3 * size.inodes;
        let inodes = size
            .inodes
            .div_ceil(pmlab_fs::layout::INODES_PER_PAGE)
            .max(8)
            * pmlab_fs::layout::INODES_PER_PAGE;
        let params = pmlab_fs::layout::Params {
            meta_pages,
            inodes,
            // Freed pages return to the bitmap only when the service applies a batch;
            // the headroom keeps a batch's allocations from running dry before that.
            domain_pages: data_pages + data_pages / 4 + 16384,
            kv_object_pages: size.kv_object_bytes.div_ceil(page).max(1),
            ..Default::default()
        };
        // The metadata and one domain's data space, each populated whole when mapped.
        let populated = (params.meta_pages + params.domain_pages).saturating_mul(page);
        check_room(scratch, populated)?;
        let dir = scratch.join(format!("vol-{}", unique()));
        let socket = scratch.join(format!("sock-{}", unique()));
        pmlab_fs::volume::create(
            &dir,
            &params,
            pmlab_fs::mkfs::RootOwner::current_user(0o755),
        )?;
        let service =
            pmlab_fs::service::spawn(&dir, &socket, pmlab_fs::service::Config::default())?;
        let fs = PxfsMount::mount(&socket)?;
        Ok(PxfsVolume {
            fs: Some(fs),
            service: Some(service),
            dir,
            socket,
        })
    }

    /// The PXFS mount.
    pub fn pxfs(&self) -> &Pxfs {
        self.fs.as_ref().expect("mounted until drop").pxfs()
    }

    /// Another PXFS mount of the volume: a client of its own (one a benchmark's threads
    /// share through [`PxfsMount::share`]).
    pub fn mount(&self) -> Result<PxfsMount> {
        PxfsMount::mount(&self.socket)
    }

    /// A KVFS store in directory `path` of the volume, over a connection of its own.
    pub fn kvfs(&self, path: &str) -> Result<Kvfs> {
        Kvfs::open(&self.socket, path, 0o644)
    }

    /// Unmounts, stops the service and removes the volume.
    pub fn destroy(mut self) -> Result<()> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<()> {
        drop(self.fs.take());
        let r = match self.service.take() {
            Some(s) => s.stop(),
            None => Ok(()),
        };
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.socket);
        r
    }
}

impl Drop for PxfsVolume {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl FileOps for PxfsVolume {
    fn name(&self) -> &str {
        "PXFS"
    }
    fn mkdir(&mut self, path: &str) -> Result<()> {
        self.fs.as_mut().expect("mounted until drop").mkdir(path)
    }
    fn create(&mut self, path: &str) -> Result<Handle> {
        self.fs.as_mut().expect("mounted until drop").create(path)
    }
    fn open(&mut self, path: &str, write: bool, append: bool) -> Result<Handle> {
        self.fs
            .as_mut()
            .expect("mounted until drop")
            .open(path, write, append)
    }
    fn read(&mut self, h: Handle, buf: &mut [u8]) -> Result<usize> {
        self.fs.as_mut().expect("mounted until drop").read(h, buf)
    }
    fn pread(&mut self, h: Handle, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.fs
            .as_mut()
            .expect("mounted until drop")
            .pread(h, off, buf)
    }
    fn write(&mut self, h: Handle, data: &[u8]) -> Result<()> {
        self.fs.as_mut().expect("mounted until drop").write(h, data)
    }
    fn pwrite(&mut self, h: Handle, off: u64, data: &[u8]) -> Result<()> {
        self.fs
            .as_mut()
            .expect("mounted until drop")
            .pwrite(h, off, data)
    }
    fn fsync(&mut self, h: Handle) -> Result<()> {
        self.fs.as_mut().expect("mounted until drop").fsync(h)
    }
    fn close(&mut self, h: Handle) -> Result<()> {
        self.fs.as_mut().expect("mounted until drop").close(h)
    }
    fn unlink(&mut self, path: &str) -> Result<()> {
        self.fs.as_mut().expect("mounted until drop").unlink(path)
    }
    fn stat(&mut self, path: &str) -> Result<u64> {
        self.fs.as_mut().expect("mounted until drop").stat(path)
    }
    fn sync(&mut self) -> Result<()> {
        self.fs.as_mut().expect("mounted until drop").sync()
    }
    fn revocations(&self) -> Option<u64> {
        self.fs.as_ref().and_then(|f| f.revocations())
    }
    fn settle(&mut self) -> Result<()> {
        self.fs.as_mut().expect("mounted until drop").settle()
    }
}

impl FileOps for PxfsMount {
    fn name(&self) -> &str {
        "PXFS"
    }
    fn mkdir(&mut self, path: &str) -> Result<()> {
        self.pxfs().mkdir(path, 0o755)
    }
    fn create(&mut self, path: &str) -> Result<Handle> {
        Ok(Handle(self.pxfs().create(path, 0o644)?.0))
    }
    fn open(&mut self, path: &str, write: bool, append: bool) -> Result<Handle> {
        let flags = OpenFlags {
            write: write || append,
            append,
            ..Default::default()
        };
        Ok(Handle(self.pxfs().open(path, flags)?.0))
    }
    fn read(&mut self, h: Handle, buf: &mut [u8]) -> Result<usize> {
        self.pxfs().read(Fd(h.0), buf)
    }
    fn pread(&mut self, h: Handle, off: u64, buf: &mut [u8]) -> Result<usize> {
        self.pxfs().pread(Fd(h.0), off, buf)
    }
    fn write(&mut self, h: Handle, data: &[u8]) -> Result<()> {
        self.pxfs().write(Fd(h.0), data).map(drop)
    }
    fn pwrite(&mut self, h: Handle, off: u64, data: &[u8]) -> Result<()> {
        self.pxfs().pwrite(Fd(h.0), off, data).map(drop)
    }
    fn fsync(&mut self, h: Handle) -> Result<()> {
        self.pxfs().fsync(Fd(h.0))
    }
    fn close(&mut self, h: Handle) -> Result<()> {
        self.pxfs().close(Fd(h.0))
    }
    fn unlink(&mut self, path: &str) -> Result<()> {
        self.pxfs().unlink(path)
    }
    fn stat(&mut self, path: &str) -> Result<u64> {
        Ok(self.pxfs().stat(path)?.size)
    }
    fn sync(&mut self) -> Result<()> {
        self.pxfs().sync()
    }
    fn revocations(&self) -> Option<u64> {
        // A shared handle answers none of its own: the mount's revoker answers them
        // all, and the mount's first handle counts them.
        Some(if self.counts_revocations {
            self.pxfs().client().revocations_answered()
        } else {
            0
        })
    }
    fn settle(&mut self) -> Result<()> {
        self.pxfs().client().wait_populated();
        Ok(())
    }
}
