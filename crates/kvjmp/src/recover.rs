//! A reader's read-only look at the redo log: whether its last committed transaction
//! is entirely in place. Recovery replays that transaction (idempotently), so when
//! every record's bytes already equal the data the store is as recovery would leave it.

use pmlab_tx::{REDO_HEADER, decode_redo, redo_body_len};

use crate::layout::{Header, LOG_LEN};

/// Whether replaying the log's last checksum-valid transaction would change nothing
/// (true too when the log holds none); `None` if the log is unreadable.
pub fn last_log_applied(seg: &[u8], h: &Header) -> Option<bool> {
    let log = seg.get(h.log as usize..(h.log + LOG_LEN) as usize)?;
    let body = redo_body_len(log.get(..REDO_HEADER as usize)?)?;
    let Some(image) = log.get(..(REDO_HEADER.checked_add(body)?) as usize) else {
        return Some(true); // no commit writes a body that long: nothing committed
    };
    let Ok(image) = decode_redo(image) else {
        return Some(true); // a torn log: its transaction never committed
    };
    Some(
        image
            .records
            .iter()
            .all(|r| seg.get(r.addr as usize..r.addr as usize + r.data.len()) == Some(&r.data[..])),
    )
}
