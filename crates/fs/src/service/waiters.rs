//! Lease requests: who may ask for what, and granting them in order.

use std::time::Instant;

use super::State;
use crate::error::FsError;
use crate::inode::{Inode, Kind, access};
use crate::layout::ROOT_INO;
use crate::lease::{ancestry, bucket_of_key, names_of_key, valid_key};
use crate::proto::Reply;

/// A lease request not yet granted.
pub(super) struct Waiter {
    pub client: u64,
    pub id: u64,
    pub key: u64,
    pub exclusive: bool,
    /// The key's ancestry, `key` first (rebuilt when something moves).
    pub up: Vec<u64>,
}

impl State {
    /// Checks that client `id` may hold a lease on `key` at all, before it waits for
    /// one: a lease lets a client read (shared) or change (exclusive) what lies below
    /// the object, and blocks every other client that wants it meanwhile, so it is
    /// granted only with the permission the client would need to do that itself.
    ///
    /// - the object exists, and the client may search every directory above it (a
    ///   lookup through the service honours search bits as the kernel's would);
    /// - a shared lease on a directory needs read or search permission on it, on a
    ///   bucket of one search permission, on a file read or write permission;
    /// - an exclusive lease on a directory or a bucket of one needs write and search
    ///   permission on the directory, on a file write permission; the owner of a file
    ///   or directory may also hold one on it (to change its attributes);
    /// - a client holds at most [`super::Limits::leases`] leases.
    pub(super) fn lease_allowed(
        &mut self,
        id: u64,
        key: u64,
        exclusive: bool,
    ) -> Result<(), FsError> {
        if !valid_key(key, self.sb.inode_count) {
            return Err(FsError::Refused(format!(
                "lease key {key:#x} names no inode or directory bucket"
            )));
        }
        let (uid, gid) = {
            let c = &self.clients[&id];
            (c.uid, c.gid)
        };
        // A bucket's names are judged as the bucket: reading them needs search
        // permission on the directory, changing them write and search permission.
        let (ino, bucket) = match bucket_of_key(key).or_else(|| names_of_key(key)) {
            Some((d, _)) => (d, true),
            None => (key, false),
        };
        let i = self.inode(ino)?;
        if i.kind == Kind::Free || (bucket && i.kind != Kind::Dir) {
            return Err(FsError::NotFound(format!(
                "lease key {key:#x} names no object"
            )));
        }
        self.search_above(uid, gid, ino, &i)?;
        let a = access(uid, gid, i.uid, i.gid, i.mode);
        // The owner may always change the object's attributes (chmod), which needs an
        // exclusive lease covering it, whatever its permission bits.
        let owner = uid == 0 || uid == i.uid;
        let ok = match (i.kind, bucket, exclusive) {
            (Kind::Dir, true, false) => a.exec,
            (Kind::Dir, true, true) => a.write && a.exec,
            (Kind::Dir, false, false) => a.read || a.exec,
            (Kind::Dir, false, true) => (a.write && a.exec) || owner,
            (_, _, false) => a.read || a.write || owner,
            (_, _, true) => a.write || owner,
        };
        if !ok {
            let kind = if exclusive {
                "an exclusive"
            } else {
                "a shared"
            };
            return Err(FsError::Denied(format!(
                "uid {uid} may not hold {kind} lease on inode {ino} (mode {:o}, owner {})",
                i.mode, i.uid
            )));
        }
        let held = self.leases.count(id);
        if held >= self.limits.leases && !self.leases.holds(id, key, false) {
            return Err(FsError::NoSpace(format!(
                "client limit: {held} leases held (at most {}); give some back",
                self.limits.leases
            )));
        }
        Ok(())
    }

    /// Requires search permission on every directory above object `ino` (inode `i`).
    fn search_above(&mut self, uid: u32, gid: u32, ino: u64, i: &Inode) -> Result<(), FsError> {
        if ino == ROOT_INO {
            return Ok(());
        }
        let mut x = i.parent;
        for _ in 0..self.sb.inode_count {
            let d = self.inode(x)?;
            if d.kind != Kind::Dir {
                return Err(FsError::Corrupt {
                    what: "inode",
                    at: crate::error::Location { page: 0, offset: 0 },
                    why: format!("inode {x}, above inode {ino}, is not a directory"),
                });
            }
            if !access(uid, gid, d.uid, d.gid, d.mode).exec {
                return Err(FsError::Denied(format!(
                    "uid {uid} may not search directory inode {x} (mode {:o}, owner {})",
                    d.mode, d.uid
                )));
            }
            if x == ROOT_INO {
                return Ok(());
            }
            x = d.parent;
        }
        Err(FsError::Corrupt {
            what: "inode",
            at: crate::error::Location { page: 0, offset: 0 },
            why: format!("the directories above inode {ino} loop"),
        })
    }

    /// Queues a lease request that [`State::lease_allowed`] passed.
    pub(super) fn enqueue(&mut self, client: u64, id: u64, key: u64, exclusive: bool) {
        let up = self.with_view(|v| ancestry(v, key));
        self.waiters.push(Waiter {
            client,
            id,
            key,
            exclusive,
            up,
        });
    }

    /// Grants `key` to client `client` if no other client's lease conflicts with it and
    /// no other client's waiting request does (it would overtake that request); grant 0
    /// (nothing granted, nothing revoked) otherwise.
    pub(super) fn try_grant(&mut self, client: u64, key: u64, exclusive: bool) -> Reply {
        let up = self.with_view(|v| ancestry(v, key));
        let waiting = self.waiters.iter().any(|e| {
            e.client != client
                && (exclusive || e.exclusive)
                && (up.contains(&e.key) || e.up.contains(&key))
        });
        if waiting || !self.leases.conflicts(client, &up, exclusive).is_empty() {
            return Reply::Granted { grant: 0 };
        }
        Reply::Granted {
            grant: self.leases.grant(client, &up, exclusive),
        }
    }

    /// Rebuilds the ancestries the lease table and the waiting requests keep, after a
    /// batch that moved a name (a directory's move changes every ancestry below it).
    pub(super) fn rechain(&mut self) {
        let sb = self.sb;
        let mut t = super::auth::Trusted::new(&mut self.meta);
        let mut view = crate::view::MediaView::with_sb(&mut t, sb);
        self.leases.rechain(&mut view);
        for w in &mut self.waiters {
            w.up = ancestry(&mut view, w.key);
        }
    }

    /// Grants what can be granted, in the order asked; asks holders to give up what
    /// blocks a waiter (once per grant); disconnects holders that did not answer a
    /// revocation within the lease timeout.
    ///
    /// A request waits behind an earlier conflicting request of another client even if
    /// no lease blocks it right now. Without that, two clients that keep taking leases
    /// the other's waiting request conflicts with (a shared lease on the root to walk a
    /// path, an exclusive one on a directory below) overtake each other's requests for
    /// ever, each new grant blocking the older request again, and the service ends up
    /// disconnecting a client that answered every revocation at once.
    pub(super) fn serve_waiters(&mut self) {
        let mut k = 0;
        let now = Instant::now();
        while k < self.waiters.len() {
            let w = &self.waiters[k];
            let (client, rid, key, excl) = (w.client, w.id, w.key, w.exclusive);
            let behind = self.waiters[..k].iter().any(|e| {
                e.client != client
                    && (excl || e.exclusive)
                    && (w.up.contains(&e.key) || e.up.contains(&key))
            });
            if behind {
                k += 1;
                continue;
            }
            let conflicts = self.leases.conflicts(client, &self.waiters[k].up, excl);
            if conflicts.is_empty() {
                let w = self.waiters.remove(k);
                let grant = self.leases.grant(client, &w.up, excl);
                if let Some(c) = self.clients.get_mut(&client) {
                    c.send(rid, &Reply::Granted { grant }, Vec::new());
                }
                self.flush_client(client);
                continue;
            }
            let timeout = self.cfg.lease_timeout;
            let late: Vec<u64> = conflicts
                .iter()
                .filter(|(_, x, g)| {
                    self.leases
                        .revoked_at(*x, *g)
                        .is_some_and(|t| now >= t + timeout)
                })
                .map(|(holder, _, _)| *holder)
                .collect();
            if !late.is_empty() {
                // They did not answer in time: they lose everything they hold.
                for holder in late {
                    eprintln!(
                        "pmlab fs: client {holder} dropped: it did not give back a revoked lease within {:?}",
                        self.cfg.lease_timeout
                    );
                    self.drop_client(holder);
                }
                k = 0;
                continue;
            }
            for &(holder, x, grant) in &conflicts {
                if self.leases.mark_revoking(x, grant, now)
                    && let Some(c) = self.clients.get_mut(&holder)
                {
                    let f = crate::proto::encode_reply(0, &Reply::Revoke { key: x, grant });
                    c.rev_out.push(f, Vec::new());
                    self.flush_client(holder);
                }
            }
            k += 1;
        }
    }
}
