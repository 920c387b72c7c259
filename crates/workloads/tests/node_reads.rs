//! [`NodeReads::Search`]: the B+-tree and the table searched node by node through the
//! transaction interface hold exactly what they hold when every node is read whole,
//! and read fewer lines of memory doing it.

use pmlab_spine::{Addr, FlushKind, Memory, PersistCounters, SpineError, VecMemory, lines_spanned};
use pmlab_tx::{Area, Protocol, RedoProtocol};
use pmlab_workloads::{Contents, Dist, Kind, NodeReads, Ops, Params, Workload};

const LOG: Area = Area::new(0, 256 * 1024);

/// A memory that counts the lines its reads span.
struct Counting {
    inner: VecMemory,
    lines_read: u64,
}

impl Memory for Counting {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read(&mut self, addr: Addr, buf: &mut [u8]) -> Result<(), SpineError> {
        self.lines_read += lines_spanned(addr, buf.len() as u64);
        self.inner.read(addr, buf)
    }
    fn write(&mut self, addr: Addr, data: &[u8]) -> Result<(), SpineError> {
        self.inner.write(addr, data)
    }
    fn flush(&mut self, addr: Addr, len: u64, kind: FlushKind) -> Result<(), SpineError> {
        self.inner.flush(addr, len, kind)
    }
    fn fence(&mut self) {
        self.inner.fence()
    }
    fn persist_counters(&self) -> PersistCounters {
        self.inner.persist_counters()
    }
}

/// Formats `kind`, runs `txs` transactions reading nodes as `reads`, checking every
/// 25; returns the contents at each check, the data area's bytes at the end, and the
/// lines read by the transactions (not the checks).
fn run(kind: Kind, dist: Dist, reads: NodeReads, txs: u64) -> (Vec<Contents>, Vec<u8>, u64) {
    let elements = if kind == Kind::BpTree { 1500 } else { 400 };
    let params = Params {
        elements,
        dist,
        ops_per_tx: kind.default_ops_per_tx(),
    };
    let data = Area::new(LOG.end(), Workload::footprint(kind, &params));
    let mem = Counting {
        inner: VecMemory::new(data.end() as usize),
        lines_read: 0,
    };
    let mut p = RedoProtocol::format(mem, LOG, data).unwrap();
    let mut w = Workload::format(&mut p, kind, &params, data).unwrap();
    w.set_node_reads(reads);
    let mut ops = Ops::new(5, &w, &params);
    let (mut seen, mut lines) = (Vec::new(), 0);
    for t in 1..=txs {
        let before = p.memory().lines_read;
        w.run_tx(&mut p, &mut ops).unwrap();
        lines += p.memory().lines_read - before;
        if t % 25 == 0 {
            seen.push(
                w.check(&mut p)
                    .unwrap_or_else(|e| panic!("{kind} {reads:?}: {e}")),
            );
        }
    }
    let bytes = p.memory().inner.bytes()[data.base as usize..data.end() as usize].to_vec();
    (seen, bytes, lines)
}

#[test]
fn searching_nodes_changes_nothing_but_the_lines_read() {
    for kind in [Kind::BpTree, Kind::Db] {
        for dist in [Dist::Uniform, Dist::Zipf] {
            let (whole, whole_bytes, whole_lines) = run(kind, dist, NodeReads::Whole, 200);
            let (search, search_bytes, search_lines) = run(kind, dist, NodeReads::Search, 200);
            assert_eq!(whole, search, "{kind} {dist:?}: contents differ");
            assert!(whole_bytes == search_bytes, "{kind} {dist:?}: data differ");
            assert!(whole.last().unwrap().count > 0);
            // Changed leaves are still read whole; searched nodes are not.
            assert!(
                search_lines < whole_lines,
                "{kind} {dist:?}: {search_lines} lines searching, {whole_lines} whole"
            );
        }
    }
}

#[test]
fn the_other_workloads_ignore_the_setting() {
    for kind in [Kind::HashTable, Kind::RbTree] {
        let a = run(kind, Dist::Zipf, NodeReads::Whole, 100);
        let b = run(kind, Dist::Zipf, NodeReads::Search, 100);
        assert_eq!(a, b, "{kind}");
    }
}

/// [`NodeReads::Edit`]: leaves changed in place by the pairs an insert or delete shifts
/// leave exactly the bytes a whole-node rewrite leaves (the checker passing at every
/// check), and read fewer lines than searching alone.
#[test]
fn editing_leaves_in_place_changes_nothing_but_the_lines_read() {
    for kind in [Kind::BpTree, Kind::Db] {
        for dist in [Dist::Uniform, Dist::Zipf] {
            let (whole, whole_bytes, _) = run(kind, dist, NodeReads::Whole, 200);
            let (_, _, search_lines) = run(kind, dist, NodeReads::Search, 200);
            let (edit, edit_bytes, edit_lines) = run(kind, dist, NodeReads::Edit, 200);
            assert_eq!(whole, edit, "{kind} {dist:?}: contents differ");
            assert!(whole_bytes == edit_bytes, "{kind} {dist:?}: data differ");
            assert!(
                edit_lines < search_lines,
                "{kind} {dist:?}: {edit_lines} lines editing, {search_lines} searching"
            );
        }
    }
}
