//! Answering revocations: the thread that reads the revocation socket ships the
//! journal and gives the lease back.

use std::os::unix::net::UnixStream;
use std::sync::Arc;

use super::conn::Conn;
use crate::journal::encode_batch;
use crate::proto::{self, Reply, Request};

/// Reads revocations until the service closes the socket, answering each.
pub(super) fn revoker(rev: UnixStream, conn: Arc<Conn>, state: Arc<super::state::StateLock>) {
    while let Ok(Some((body, _))) = proto::recv_frame(&rev) {
        let Ok((_, Reply::Revoke { key, grant })) = proto::decode_reply(&body) else {
            // Anything else on this socket is a broken service: stop listening.
            return;
        };
        answer(&conn, &state, key, grant);
    }
}

/// Ships the journal and releases grant `grant` of `key`.
fn answer(conn: &Conn, state: &super::state::StateLock, key: u64, grant: u64) {
    conn.contention.revoked(key);
    conn.revocations
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The grant's reply may still be unread in the reply ring (the service sends
    // it before the revocation); it is read first, so the lease table knows it.
    let held = conn.settle_grant(key, grant);
    // Like `Client::state`: a caller that panicked holding the state must not silence
    // the revoker, or the service would drop this client.
    let mut s = super::state::lock(state);
    // Once the lease goes, another client may free pages a copy in flight uses.
    s.copies.wait_idle();
    if held {
        let mut l = conn.leases.lock().unwrap_or_else(|e| e.into_inner());
        // Replaced by a newer grant in the meantime: that one stays.
        if l.get(&key).map(|h| h.1) == Some(grant) {
            l.remove(&key);
        }
    }
    let batch = if s.journal.is_empty() {
        Vec::new()
    } else {
        encode_batch(&s.journal)
    };
    s.journal.clear();
    s.batch_pages.clear();
    // Another client may be about to unlink or rename files this client holds open:
    // the service learns of them before the lease goes.
    let mut ok = true;
    if let Some(inos) = s.register_opens(|_| true) {
        match conn.send(&Request::Opened { inos }, &[]) {
            Ok(id) => s.inflight.push((id, false)),
            Err(_) => ok = false,
        }
    }
    // Answered even when the grant is no longer held here (freed with its inode, or
    // already replaced): the release of an old grant changes nothing at the service,
    // and a revocation left unanswered gets the client dropped.
    match conn.send(&Request::Release { key, grant }, &batch) {
        Ok(id) => s.inflight.push((id, !batch.is_empty())),
        Err(_) => ok = false,
    }
    // The overlay (and what was cached through it) goes only once the service has
    // applied everything it shows, and the state stays locked until then. Dropping it
    // before the reply, or letting the client's own thread read in between, opens a
    // window in which the mapping shows the batch as not made: a file created a moment
    // ago has no name yet, and the next operation fails with "no such file or
    // directory" or records ops against the pre-batch state that the service then
    // refuses (the lost-create race of tests/stress_rename_race.rs).
    let waited = s.wait_inflight();
    if let Err(e) = waited {
        s.record_loss(&e.to_string());
    } else if !ok && !batch.is_empty() {
        s.record_loss("the service connection is gone");
    }
    s.overlay.clear();
    s.overlay_gen += 1;
    s.written = Some(Default::default());
    s.forget_cached();
}
