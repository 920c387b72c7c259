//! Checks of the [`Protocol`] contract that any implementation runs in its tests: the
//! software logs here, and the hardware protocols of the machine model with the same
//! calls. Each check returns `Err(what went wrong)`; [`check_all`] runs them all.
//!
//! A check is given `fresh`, which makes a newly formatted instance (over new memory),
//! `reattach`, which attaches a new instance to the memory an old one gave back (the
//! caller's restart), and the data area the transactions may write. Crash behaviour is
//! not checked here: that is the crash explorer's job (`pmlab-txcheck`).

use pmlab_spine::Addr;

use crate::error::TxError;
use crate::protocol::{Area, Protocol};

/// How a check makes instances.
pub struct Harness<F, R> {
    /// A newly formatted instance over new memory.
    pub fresh: F,
    /// A new instance attached to the memory of an old one (not yet recovered).
    pub reattach: R,
    /// The area transactions may write (at least 4 KiB).
    pub data: Area,
}

type Check<F, R> = fn(&mut Harness<F, R>) -> Result<(), String>;

/// Runs every check; the first failure names the check.
pub fn check_all<P, F, R>(h: &mut Harness<F, R>) -> Result<(), String>
where
    P: Protocol,
    F: FnMut() -> P,
    R: FnMut(P::Mem) -> Result<P, TxError>,
{
    let checks: [(&str, Check<F, R>); 7] = [
        ("misuse is an error", misuse::<P, F, R>),
        ("commit publishes and numbers", commit_publishes::<P, F, R>),
        ("abort restores", abort_restores::<P, F, R>),
        ("a failed write changes nothing", failed_write::<P, F, R>),
        (
            "restart keeps what committed",
            restart_keeps_committed::<P, F, R>,
        ),
        ("declare is only a hint", declare_is_a_hint::<P, F, R>),
        ("overlapping writes", overlapping_writes::<P, F, R>),
    ];
    for (name, check) in checks {
        check(h).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

fn err<T>(what: impl Into<String>) -> Result<T, String> {
    Err(what.into())
}

fn ok<T>(r: Result<T, TxError>, what: &str) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// Reads `len` bytes at `addr` through the protocol.
fn read<P: Protocol>(p: &mut P, addr: Addr, len: usize) -> Result<Vec<u8>, String> {
    let mut b = vec![0u8; len];
    ok(p.read(addr, &mut b), "read")?;
    Ok(b)
}

/// Misuse is refused with the documented error, and changes nothing.
pub fn misuse<P, F, R>(h: &mut Harness<F, R>) -> Result<(), String>
where
    P: Protocol,
    F: FnMut() -> P,
    R: FnMut(P::Mem) -> Result<P, TxError>,
{
    let mut p = (h.fresh)();
    let a = h.data.base;
    let no_tx = |r: Result<(), TxError>, op| match r {
        Err(TxError::NoTransaction { .. }) => Ok(()),
        other => err(format!("{op} outside a transaction gave {other:?}")),
    };
    no_tx(p.write(a, &[1]), "write")?;
    no_tx(p.abort(), "abort")?;
    no_tx(p.declare(&[(a, 8)]), "declare")?;
    no_tx(p.commit().map(|_| ()), "commit")?;
    ok(p.begin(), "begin")?;
    if !p.in_transaction() {
        return err("in_transaction() is false after begin");
    }
    match p.begin() {
        Err(TxError::InTransaction) => {}
        other => return err(format!("a nested begin gave {other:?}")),
    }
    ok(p.abort(), "abort")?;
    if p.in_transaction() {
        return err("in_transaction() is true after abort");
    }
    let mut q = ok((h.reattach)(p.into_memory()), "reattach")?;
    match q.begin() {
        Err(TxError::NeedsRecovery) => {}
        other => return err(format!("begin before recover gave {other:?}")),
    }
    ok(q.recover(), "recover")?;
    ok(q.begin(), "begin after recover")?;
    ok(q.abort(), "abort")
}

/// Reads see the transaction's writes at once; commit publishes them, numbers the
/// transaction 1, 2, 3, ... and (after `flush`) acknowledges it durable.
pub fn commit_publishes<P, F, R>(h: &mut Harness<F, R>) -> Result<(), String>
where
    P: Protocol,
    F: FnMut() -> P,
    R: FnMut(P::Mem) -> Result<P, TxError>,
{
    let mut p = (h.fresh)();
    let a = h.data.base;
    for round in 1..=3u64 {
        ok(p.begin(), "begin")?;
        ok(p.write_u64(a + 8 * round, round * 11), "write")?;
        if ok(p.read_u64(a + 8 * round), "read")? != round * 11 {
            return err("a transaction does not read its own write");
        }
        let id = ok(p.commit(), "commit")?;
        if id != round {
            return err(format!("commit {round} returned id {id}"));
        }
        ok(p.flush(), "flush")?;
        if p.durable() != id {
            return err(format!(
                "durable() is {} after flush, not {id}",
                p.durable()
            ));
        }
        if ok(p.read_u64(a + 8 * round), "read")? != round * 11 {
            return err("a committed write is not visible");
        }
    }
    let s = p.stats();
    if s.commits != 3 || s.aborts != 0 || s.writes != 3 || s.write_bytes != 24 {
        return err(format!("stats after 3 one-word commits: {s:?}"));
    }
    // An empty transaction commits too, and takes the next number.
    ok(p.begin(), "begin")?;
    match ok(p.commit(), "empty commit")? {
        4 => Ok(()),
        id => err(format!("the empty commit returned id {id}")),
    }
}

/// Abort: every read returns what it did before begin, no id is used, and the abort
/// is counted.
pub fn abort_restores<P, F, R>(h: &mut Harness<F, R>) -> Result<(), String>
where
    P: Protocol,
    F: FnMut() -> P,
    R: FnMut(P::Mem) -> Result<P, TxError>,
{
    let mut p = (h.fresh)();
    let a = h.data.base;
    ok(p.begin(), "begin")?;
    ok(p.write(a, &[7u8; 300]), "write")?;
    ok(p.commit(), "commit")?;
    let before = read(&mut p, a, 600)?;
    ok(p.begin(), "begin")?;
    ok(p.write(a + 10, &[1u8; 100]), "write")?;
    ok(p.write(a + 250, &[2u8; 200]), "write")?;
    ok(p.write(a + 50, &[3u8; 8]), "write")?;
    ok(p.abort(), "abort")?;
    if read(&mut p, a, 600)? != before {
        return err("reads after abort differ from reads before begin");
    }
    if p.stats().aborts != 1 {
        return err(format!("aborts counted: {}", p.stats().aborts));
    }
    ok(p.begin(), "begin")?;
    ok(p.write_u64(a, 5), "write")?;
    match ok(p.commit(), "commit")? {
        2 => {}
        id => return err(format!("the commit after an abort returned id {id}, not 2")),
    }
    // And the aborted writes stay gone across a restart.
    let mut q = ok((h.reattach)(p.into_memory()), "reattach")?;
    ok(q.recover(), "recover")?;
    let mut want = before;
    want[..8].copy_from_slice(&5u64.to_le_bytes());
    if read(&mut q, a, 600)? != want {
        return err("after a restart, the data is not the committed state");
    }
    Ok(())
}

/// A write outside the data area fails, changes nothing and leaves the transaction
/// open.
pub fn failed_write<P, F, R>(h: &mut Harness<F, R>) -> Result<(), String>
where
    P: Protocol,
    F: FnMut() -> P,
    R: FnMut(P::Mem) -> Result<P, TxError>,
{
    let mut p = (h.fresh)();
    let a = h.data.base;
    ok(p.begin(), "begin")?;
    ok(p.write_u64(a, 9), "write")?;
    if p.write(h.data.end() - 4, &[0u8; 8]).is_ok() {
        return err("a write crossing the end of the data area was accepted");
    }
    if !p.in_transaction() {
        return err("a failed write ended the transaction");
    }
    if ok(p.read_u64(a), "read")? != 9 {
        return err("a failed write undid an earlier write of the transaction");
    }
    ok(p.commit(), "commit")?;
    if ok(p.read_u64(a), "read")? != 9 {
        return err("the transaction's good write did not commit");
    }
    Ok(())
}

/// A clean restart keeps every committed write; recovering twice changes nothing.
pub fn restart_keeps_committed<P, F, R>(h: &mut Harness<F, R>) -> Result<(), String>
where
    P: Protocol,
    F: FnMut() -> P,
    R: FnMut(P::Mem) -> Result<P, TxError>,
{
    let mut p = (h.fresh)();
    let a = h.data.base;
    for i in 0..20u64 {
        ok(p.begin(), "begin")?;
        ok(p.write_u64(a + (i * 72) % 2048, i + 1), "write")?;
        ok(p.write_u64(a + 2048 + (i * 24) % 1024, !i), "write")?;
        ok(p.commit(), "commit")?;
    }
    let want = read(&mut p, a, 4096)?;
    let mut q = ok((h.reattach)(p.into_memory()), "reattach")?;
    ok(q.recover(), "recover")?;
    if read(&mut q, a, 4096)? != want {
        return err("the data after recovery is not the committed state");
    }
    ok(q.recover(), "second recover")?;
    if read(&mut q, a, 4096)? != want {
        return err("a second recovery changed the data");
    }
    ok(q.begin(), "begin")?;
    ok(q.write_u64(a, 77), "write")?;
    ok(q.commit(), "commit after recovery")?;
    Ok(())
}

/// Declaring ranges (and writing only some of them, and some others) gives the same
/// results as not declaring.
pub fn declare_is_a_hint<P, F, R>(h: &mut Harness<F, R>) -> Result<(), String>
where
    P: Protocol,
    F: FnMut() -> P,
    R: FnMut(P::Mem) -> Result<P, TxError>,
{
    let mut p = (h.fresh)();
    let a = h.data.base;
    let before = read(&mut p, a, 512)?;
    ok(p.begin(), "begin")?;
    ok(p.declare(&[(a, 16), (a + 100, 8), (a, 8)]), "declare")?;
    ok(p.write_u64(a, 1), "write")?;
    ok(p.write_u64(a + 300, 2), "write")?;
    ok(p.abort(), "abort")?;
    if read(&mut p, a, 512)? != before {
        return err("an aborted transaction that declared ranges left changes");
    }
    ok(p.begin(), "begin")?;
    ok(p.declare(&[(a, 16)]), "declare")?;
    ok(p.write_u64(a + 8, 3), "write")?;
    ok(p.write_u64(a + 400, 4), "write")?;
    ok(p.commit(), "commit")?;
    let (x, y) = (
        ok(p.read_u64(a + 8), "read")?,
        ok(p.read_u64(a + 400), "read")?,
    );
    if (x, y) != (3, 4) {
        return err(format!("after commit: {x}, {y}"));
    }
    Ok(())
}

/// Writes that overlap, nest and straddle lines within one transaction: reads and
/// the committed state follow the last write of each byte.
pub fn overlapping_writes<P, F, R>(h: &mut Harness<F, R>) -> Result<(), String>
where
    P: Protocol,
    F: FnMut() -> P,
    R: FnMut(P::Mem) -> Result<P, TxError>,
{
    let mut p = (h.fresh)();
    let a = h.data.base;
    let mut model = read(&mut p, a, 1024)?;
    ok(p.begin(), "begin")?;
    let writes: [(u64, usize, u8); 6] = [
        (60, 10, 1),
        (0, 200, 2),
        (100, 50, 3),
        (190, 30, 4),
        (64, 1, 5),
        (500, 300, 6),
    ];
    for (off, len, v) in writes {
        ok(p.write(a + off, &vec![v; len]), "write")?;
        model[off as usize..off as usize + len].fill(v);
        if read(&mut p, a, 1024)? != model {
            return err(format!(
                "reads after the write at +{off} differ from the model"
            ));
        }
    }
    ok(p.commit(), "commit")?;
    let mut q = ok((h.reattach)(p.into_memory()), "reattach")?;
    ok(q.recover(), "recover")?;
    if read(&mut q, a, 1024)? != model {
        return err("the committed state differs from the model");
    }
    Ok(())
}
