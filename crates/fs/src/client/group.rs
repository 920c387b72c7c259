//! Group commit: an fsync waits for the service outside the client's state.
//!
//! An fsync sends the journal and then waits a round trip for the service to validate
//! and commit it. Waiting with the state locked, as any other request does, makes every
//! other thread of the process wait too, and each fsync of many threads then costs a
//! round trip of its own. So an fsync takes what is in flight (its batch and any sent
//! before), lets the state go, and waits; the other threads record operations
//! meanwhile, and the next fsync ships all of them in one batch: the batches and round
//! trips per fsync fall as threads are added, which is what group commit is for.
//!
//! The overlay (the client's own changes, which the mapping does not show yet) goes only
//! once the service has applied every batch it shows: when an fsync comes back and
//! nothing is recorded, in flight or waited for elsewhere, or when a ship with the state
//! locked has waited, without taking them, for the replies that fsyncs outside wait
//! for ([`State::wait_outside`]; then the pages those replies list are not known to it,
//! and it drops what was read through the overlay's pages, as after a batch applied
//! without a list). A reply read for an overlay that has gone since says nothing about
//! the current one's pages.
//!
//! An fsync that finds nothing to send (other threads' fsyncs shipped what it waits
//! for) follows the fsyncs waiting outside: it waits, outside the state too, until
//! they have taken in their replies, and reports what they found. Waiting for those
//! replies with the state locked, as a locked ship does, held every other thread off
//! the state for a round trip, in the common case of group commit.

use std::sync::{Arc, Condvar, Mutex};

use super::conn::Conn;
use super::state::State;
use crate::error::{FsError, Result};
use crate::proto::Reply;

/// Requests an fsync waits for outside the state, the overlay they belong to, and the
/// flight its followers wait on.
struct Waits {
    ids: Vec<(u64, bool)>,
    overlay: u64,
    flight: Arc<Flight>,
}

/// One fsync's wait outside the state, as the fsyncs that follow it see it: how its
/// batches went, once it has taken in their replies (`Err`: the loss it recorded).
#[derive(Default)]
pub(crate) struct Flight {
    outcome: Mutex<Option<std::result::Result<(), String>>>,
    done: Condvar,
}

impl Flight {
    fn finish(&self, outcome: std::result::Result<(), String>) {
        let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        o.get_or_insert(outcome);
        self.done.notify_all();
    }

    fn wait(&self) -> std::result::Result<(), String> {
        let mut o = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = &*o {
                return r.clone();
            }
            o = self.done.wait(o).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Waits {
    /// Followers never wait for a flight whose fsync ended without finishing it.
    fn drop(&mut self) {
        self.flight
            .finish(Err("the fsync that shipped the batch ended early".into()));
    }
}

/// Ships the journal and waits, outside the state, until the service has applied it
/// and everything sent before; a refusal is a loss, as for [`State::ship`].
pub(super) fn sync(conn: &Conn, state: &super::state::StateLock) -> Result<()> {
    let lock = || super::state::lock(state);
    let waits = {
        let mut s = lock();
        match s.send_journal() {
            Ok(()) if !s.inflight.is_empty() => s.wait_outside_for(),
            Ok(()) if !s.flights.is_empty() => {
                let flights = s.flights.clone();
                drop(s);
                return follow(&flights);
            }
            // Nothing in flight (or the send failed): the locked ship is as quick.
            sent => return s.finish_ship(sent),
        }
    };
    let replies: Vec<(bool, Result<Reply>)> = waits
        .ids
        .iter()
        .map(|&(id, batch)| (batch, conn.wait(id).map(|(r, _)| r)))
        .collect();
    let r = lock().absorb_outside(&waits, replies);
    waits
        .flight
        .finish(r.as_ref().map(|_| ()).map_err(|e| e.to_string()));
    r
}

/// Waits for the fsyncs outside the state that shipped what this one waits for; the
/// first loss one of them recorded is the answer.
fn follow(flights: &[Arc<Flight>]) -> Result<()> {
    let mut first = Ok(());
    for f in flights {
        if let Err(e) = f.wait() {
            first = first.and(Err(FsError::Lost(e)));
        }
    }
    first
}

impl State {
    /// Takes what is in flight for an fsync to wait for outside the state.
    fn wait_outside_for(&mut self) -> Waits {
        let ids = std::mem::take(&mut self.inflight);
        let flight = Arc::new(Flight::default());
        self.flights.push(flight.clone());
        self.outside_last = self.outside_last.max(ids.last().map_or(0, |i| i.0));
        Waits {
            ids,
            overlay: self.overlay_gen,
            flight,
        }
    }

    /// Waits (with the state locked) until the service has answered what fsyncs
    /// outside wait for, leaving the replies to them; their lists of the pages the
    /// service wrote are theirs, so the next overlay drop takes none.
    pub(super) fn wait_outside(&mut self) -> Result<()> {
        if self.flights.is_empty() {
            return Ok(());
        }
        self.written = None;
        self.conn.wait_answered(self.outside_last)
    }

    /// Takes in the replies an fsync waited for outside the state (as
    /// [`State::wait_inflight`] does), and drops the overlay if nothing it shows is
    /// still to be applied.
    fn absorb_outside(&mut self, w: &Waits, replies: Vec<(bool, Result<Reply>)>) -> Result<()> {
        self.flights.retain(|f| !Arc::ptr_eq(f, &w.flight));
        if self.flights.is_empty() {
            self.outside_last = 0;
        }
        let current = w.overlay == self.overlay_gen;
        let mut first = Ok(());
        for (batch, reply) in replies {
            match reply {
                Ok(Reply::Shipped { written }) if current => {
                    if let Some(wr) = &mut self.written {
                        wr.extend(written.chunks_exact(2).map(|p| (p[0], p[1])));
                    }
                }
                Ok(_) if batch && current => self.written = None,
                Ok(_) => {}
                Err(e) => {
                    if current {
                        self.written = None;
                    }
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
        }
        if let Err(e) = &first {
            self.record_loss(&e.to_string());
            if !current {
                // The overlay that showed the refused batch went as if it was applied.
                self.forget_cached();
            }
        }
        if self.journal.is_empty() && self.inflight.is_empty() && self.flights.is_empty() {
            self.drop_overlay(first.is_ok());
        }
        first.map_err(|e| FsError::Lost(e.to_string()))
    }
}
