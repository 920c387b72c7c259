//! Webproxy on KVFS (the paper's §6.3): the personality's file operations mapped onto
//! put/get/erase in one flat directory. `createfile` + `appendfilerand` + `closefile`
//! becomes one put of the appended bytes, `openfile` + `readwholefile` + `closefile`
//! one get (which copies the whole object into the caller's buffer), `deletefile` an
//! erase. The fileset, its sizes and the picks are the same as on the other targets,
//! drawn from the same seed.

use std::sync::Arc;

use pmlab_fs::kvfs::Kvfs;
use pmlab_fs::{FsError, Result};
use pmlab_fscheck::bench::IoBuf;

use super::filebench::{Fileset, Target};

/// A KVFS store driven by FileBench's flowops: one thread's handle on a store the
/// threads of the process share (one libFS client, as for PXFS).
pub struct KvTarget {
    kv: Arc<Kvfs>,
    /// Whether this handle reports the store's revocations (one handle per store).
    counts_revocations: bool,
    /// The object being built by createfile/appendfilerand, and its length so far.
    pending: Option<(usize, usize)>,
    /// What puts store, page-aligned as the POSIX targets' buffer is (see `IoBuf`).
    value: IoBuf,
    /// Where gets copy values to (`Kvfs::get_to`): as large as the largest value,
    /// page-aligned and touched before the timed phase, as the POSIX targets' buffer
    /// is. A buffer the gets grew had each of FileBench's 100 webproxy threads fault
    /// its pages in during the timed phase, which the POSIX targets did not.
    read_buf: IoBuf,
    got: usize,
}

fn key(k: usize) -> String {
    format!("f{k}")
}

fn unsupported(what: &str) -> FsError {
    FsError::WrongKind(format!(
        "KVFS has no {what}: the personality does not fit put/get/erase"
    ))
}

impl KvTarget {
    /// Drives `kv`; values are at most `max_value` bytes. Several targets may share
    /// one store; the one made with `counts_revocations` reports its revocations.
    pub fn new(kv: Arc<Kvfs>, max_value: usize, counts_revocations: bool) -> KvTarget {
        KvTarget {
            kv,
            counts_revocations,
            pending: None,
            value: IoBuf::new(max_value, 0x3c),
            read_buf: IoBuf::new(max_value, 0x3c),
            got: 0,
        }
    }

    /// Bytes returned by gets so far (keeps the copies observable).
    pub fn bytes_read(&self) -> usize {
        self.got
    }

    fn put(&mut self, k: usize, len: usize) -> Result<()> {
        let len = len.min(self.value.len());
        self.kv.put(&key(k), &self.value[..len])
    }
}

impl Target for KvTarget {
    fn name(&self) -> String {
        "KVFS".into()
    }
    fn populate(&mut self, set: &Fileset, log: Option<(&str, u64)>) -> Result<()> {
        if log.is_some() {
            return Err(unsupported("log file"));
        }
        for k in set.existing() {
            self.put(k, set.sizes[k] as usize)?;
        }
        self.kv.sync()?;
        // SCM is present from the start: the populating of the data space this
        // store mapped is setup, not part of the timed phase.
        self.kv.client().wait_populated();
        Ok(())
    }
    fn create(&mut self, _set: &Fileset, k: usize) -> Result<()> {
        self.pending = Some((k, 0));
        Ok(())
    }
    fn write_whole(&mut self, size: u64, _iosize: u64) -> Result<()> {
        match &mut self.pending {
            Some((_, len)) => *len = size as usize,
            None => return Err(unsupported("in-place write")),
        }
        Ok(())
    }
    fn append(&mut self, n: u64) -> Result<()> {
        match &mut self.pending {
            Some((_, len)) => *len += n as usize,
            None => return Err(unsupported("append to an existing object")),
        }
        Ok(())
    }
    fn close(&mut self) -> Result<()> {
        if let Some((k, len)) = self.pending.take() {
            self.put(k, len)?;
        }
        Ok(())
    }
    fn open(&mut self, _set: &Fileset, k: usize) -> Result<()> {
        // Into one reused buffer, as the POSIX targets read into theirs.
        match self.kv.get_to(&key(k), &mut self.read_buf)? {
            Some(len) => {
                self.got += len;
                Ok(())
            }
            None => Err(FsError::NotFound(key(k))),
        }
    }
    fn read_whole(&mut self, _iosize: u64) -> Result<()> {
        // The get in `open` already copied the whole object.
        Ok(())
    }
    fn delete(&mut self, _set: &Fileset, k: usize) -> Result<()> {
        if self.kv.erase(&key(k))? {
            Ok(())
        } else {
            Err(FsError::NotFound(key(k)))
        }
    }
    fn stat(&mut self, _set: &Fileset, _k: usize) -> Result<()> {
        Err(unsupported("stat"))
    }
    fn fsync(&mut self) -> Result<()> {
        Err(unsupported("fsync of an open file"))
    }
    fn append_log(&mut self, _n: u64) -> Result<()> {
        Err(unsupported("log file"))
    }
    fn finish(&mut self) -> Result<()> {
        self.kv.sync()
    }
    fn revocations(&self) -> Option<u64> {
        Some(if self.counts_revocations {
            self.kv.client().revocations_answered()
        } else {
            0
        })
    }
}
