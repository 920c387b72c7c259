//! Personalities through a [`FileOps`] file system: PXFS, tmpfs, ext4.

use pmlab_fs::Result;
use pmlab_fscheck::bench::{FileOps, Handle, IoBuf};

use super::{Fileset, Target};

/// Runs personalities through a [`FileOps`] file system (PXFS, tmpfs, ext4).
pub struct PosixTarget<'a, F: FileOps> {
    fs: &'a mut F,
    open: Option<Handle>,
    log: Option<Handle>,
    /// Page-aligned, as every target's buffers are (see `IoBuf`).
    buf: IoBuf,
}

impl<'a, F: FileOps> PosixTarget<'a, F> {
    /// Drives `fs`; whole-file transfers use a buffer of `iosize` bytes.
    pub fn new(fs: &'a mut F, iosize: u64) -> Self {
        PosixTarget {
            fs,
            open: None,
            log: None,
            buf: IoBuf::new(iosize.max(1) as usize, 0x3c),
        }
    }

    fn fd(&self) -> Result<Handle> {
        self.open
            .ok_or_else(|| pmlab_fs::FsError::BadHandle("no file open in slot 1".into()))
    }

    fn write_n(&mut self, h: Handle, mut n: u64) -> Result<()> {
        while n > 0 {
            let k = n.min(self.buf.len() as u64) as usize;
            self.fs.write(h, &self.buf[..k])?;
            n -= k as u64;
        }
        Ok(())
    }
}

impl<F: FileOps> Target for PosixTarget<'_, F> {
    fn name(&self) -> String {
        self.fs.name().to_string()
    }
    fn populate(&mut self, set: &Fileset, log: Option<(&str, u64)>) -> Result<()> {
        for d in &set.dirs {
            self.fs.mkdir(d)?;
        }
        for k in set.existing() {
            let h = self.fs.create(&set.paths[k])?;
            self.write_n(h, set.sizes[k])?;
            self.fs.close(h)?;
        }
        if let Some((path, size)) = log {
            let h = self.fs.create(path)?;
            self.write_n(h, size)?;
            self.fs.close(h)?;
        }
        self.fs.sync()?;
        self.fs.settle()?;
        self.attach(log.map(|l| l.0))
    }
    fn attach(&mut self, log: Option<&str>) -> Result<()> {
        if let Some(path) = log {
            self.log = Some(self.fs.open(path, false, true)?);
        }
        Ok(())
    }
    fn create(&mut self, set: &Fileset, k: usize) -> Result<()> {
        self.open = Some(self.fs.create(&set.paths[k])?);
        Ok(())
    }
    fn write_whole(&mut self, size: u64, iosize: u64) -> Result<()> {
        let h = self.fd()?;
        let mut left = size;
        while left > 0 {
            let k = left.min(iosize).min(self.buf.len() as u64) as usize;
            self.fs.write(h, &self.buf[..k])?;
            left -= k as u64;
        }
        Ok(())
    }
    fn append(&mut self, n: u64) -> Result<()> {
        // Files are opened for appending (see `open`), so writes land at the end as
        // FileBench's seek-to-end-then-write does.
        let h = self.fd()?;
        self.write_n(h, n)
    }
    fn close(&mut self) -> Result<()> {
        let h = self.fd()?;
        self.open = None;
        self.fs.close(h)
    }
    fn open(&mut self, set: &Fileset, k: usize) -> Result<()> {
        // FileBench opens O_RDWR; appending mode puts appends at the end and leaves
        // reads starting at offset 0, and no personality writes in place after opening.
        self.open = Some(self.fs.open(&set.paths[k], false, true)?);
        Ok(())
    }
    fn read_whole(&mut self, iosize: u64) -> Result<()> {
        let h = self.fd()?;
        let n = (iosize as usize).min(self.buf.len());
        while self.fs.read(h, &mut self.buf[..n])? > 0 {}
        Ok(())
    }
    fn delete(&mut self, set: &Fileset, k: usize) -> Result<()> {
        self.fs.unlink(&set.paths[k])
    }
    fn stat(&mut self, set: &Fileset, k: usize) -> Result<()> {
        self.fs.stat(&set.paths[k]).map(drop)
    }
    fn fsync(&mut self) -> Result<()> {
        let h = self.fd()?;
        self.fs.fsync(h)
    }
    fn append_log(&mut self, n: u64) -> Result<()> {
        let h = self
            .log
            .ok_or_else(|| pmlab_fs::FsError::BadHandle("no log file open".into()))?;
        self.write_n(h, n)
    }
    fn finish(&mut self) -> Result<()> {
        if let Some(h) = self.log.take() {
            self.fs.close(h)?;
        }
        self.fs.sync()
    }
    fn revocations(&self) -> Option<u64> {
        self.fs.revocations()
    }
}
