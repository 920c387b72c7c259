//! Inodes: the object table entries every interface (PXFS, KVFS) shares.

use crate::media::le;

/// Bytes of one inode in the table.
pub const INODE_SIZE: usize = 128;

/// What an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// An unused table slot.
    Free = 0,
    /// A PXFS file: a radix tree of data pages.
    File = 1,
    /// A directory: a hash table from names to inode numbers.
    Dir = 2,
    /// A KVFS object: one contiguous, fixed-size extent of data pages.
    Kv = 3,
}

impl Kind {
    /// The kind stored as `v`, if valid.
    pub fn from_u8(v: u8) -> Option<Kind> {
        match v {
            0 => Some(Kind::Free),
            1 => Some(Kind::File),
            2 => Some(Kind::Dir),
            3 => Some(Kind::Kv),
            _ => None,
        }
    }
}

/// A decoded inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inode {
    /// What the object is.
    pub kind: Kind,
    /// Height of a file's radix tree (0: `root` is the only data page).
    pub height: u8,
    /// The permission domain holding the object's data pages.
    pub domain: u16,
    /// Permission bits (the low 9 bits of a POSIX mode).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Names referring to the object (a directory counts its parent's entry only).
    pub nlink: u32,
    /// Size in bytes (directories: number of entries).
    pub size: u64,
    /// Files: root of the radix tree; directories: the hash table's root page; KVFS
    /// objects: first data page of the extent. 0 when there is none.
    pub root: u64,
    /// The directory the object was created in or last moved to; hierarchical leases and
    /// the rename cycle check walk these.
    pub parent: u64,
    /// Bumped every time the slot is reused, so a stale reference can be told apart.
    pub generation: u64,
    /// The bucket of `parent`'s hash table holding the object's name: a lease on that
    /// bucket covers the object (KVFS locks the table page by page).
    pub bucket: u16,
    /// Last change of the contents (data or entries), nanoseconds since the Unix epoch.
    pub mtime: u64,
    /// Last change of the inode itself (contents, names, permissions), nanoseconds since
    /// the Unix epoch. Set only by the service's clock (see [`crate::apply::Authority::now`]).
    pub ctime: u64,
}

impl Inode {
    /// A free slot.
    pub const FREE: Inode = Inode {
        kind: Kind::Free,
        height: 0,
        domain: 0,
        mode: 0,
        uid: 0,
        gid: 0,
        nlink: 0,
        size: 0,
        root: 0,
        parent: 0,
        generation: 0,
        bucket: 0,
        mtime: 0,
        ctime: 0,
    };

    /// Encodes into a 128-byte slot.
    pub fn encode(&self, b: &mut [u8]) {
        b[..INODE_SIZE].fill(0);
        b[0] = self.kind as u8;
        b[1] = self.height;
        le::put_u16(b, 2, self.domain);
        le::put_u32(b, 4, self.mode);
        le::put_u32(b, 8, self.uid);
        le::put_u32(b, 12, self.gid);
        le::put_u32(b, 16, self.nlink);
        le::put_u64(b, 24, self.size);
        le::put_u64(b, 32, self.root);
        le::put_u64(b, 40, self.parent);
        le::put_u64(b, 48, self.generation);
        le::put_u16(b, 56, self.bucket);
        le::put_u64(b, 64, self.mtime);
        le::put_u64(b, 72, self.ctime);
    }

    /// Decodes a 128-byte slot; `Err` carries the byte offset (within the slot) of a
    /// field that holds no valid value.
    pub fn decode(b: &[u8]) -> Result<Inode, (usize, String)> {
        let kind = Kind::from_u8(b[0]).ok_or_else(|| (0, format!("kind {} is not valid", b[0])))?;
        Ok(Inode {
            kind,
            height: b[1],
            domain: le::u16_at(b, 2),
            mode: le::u32_at(b, 4),
            uid: le::u32_at(b, 8),
            gid: le::u32_at(b, 12),
            nlink: le::u32_at(b, 16),
            size: le::u64_at(b, 24),
            root: le::u64_at(b, 32),
            parent: le::u64_at(b, 40),
            generation: le::u64_at(b, 48),
            bucket: le::u16_at(b, 56),
            mtime: le::u64_at(b, 64),
            ctime: le::u64_at(b, 72),
        })
    }
}

/// The access a credential has to an object with the given owner and mode, POSIX-style:
/// root may read, write and search everything; otherwise the owner, group or other bits
/// apply (only the primary group is known: the service learns a client's credentials
/// from SO_PEERCRED, which carries no supplementary groups).
pub fn access(uid: u32, gid: u32, owner: u32, group: u32, mode: u32) -> Access {
    if uid == 0 {
        return Access {
            read: true,
            write: true,
            exec: true,
        };
    }
    let bits = if uid == owner {
        (mode >> 6) & 7
    } else if gid == group {
        (mode >> 3) & 7
    } else {
        mode & 7
    };
    Access {
        read: bits & 4 != 0,
        write: bits & 2 != 0,
        exec: bits & 1 != 0,
    }
}

/// Read, write and execute (for a directory: search) permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// May read (a directory: list its names).
    pub read: bool,
    /// May write (a directory: add and remove names).
    pub write: bool,
    /// May execute (a directory: look names up in it, pass through it).
    pub exec: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let i = Inode {
            kind: Kind::File,
            height: 2,
            domain: 3,
            mode: 0o640,
            uid: 1000,
            gid: 100,
            nlink: 1,
            size: 12345,
            root: 77,
            parent: 1,
            generation: 9,
            bucket: 17,
            mtime: 1_700_000_000_123_456_789,
            ctime: 1_700_000_001_000_000_000,
        };
        let mut b = [0u8; INODE_SIZE];
        i.encode(&mut b);
        assert_eq!(Inode::decode(&b).unwrap(), i);
        b[0] = 9;
        assert_eq!(Inode::decode(&b).unwrap_err().0, 0);
    }

    #[test]
    fn posix_access() {
        assert!(access(0, 0, 5, 5, 0).write);
        assert!(access(5, 9, 5, 5, 0o600).write);
        assert!(!access(6, 5, 5, 5, 0o640).write);
        assert!(access(6, 5, 5, 5, 0o640).read);
        assert!(!access(6, 6, 5, 5, 0o640).read);
        assert!(access(6, 5, 5, 5, 0o710).exec && !access(6, 5, 5, 5, 0o710).read);
        assert!(!access(6, 6, 5, 5, 0o776).exec && access(0, 0, 5, 5, 0).exec);
    }
}
