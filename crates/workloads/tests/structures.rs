//! Every workload under both software protocols: the structures hold what a plain
//! model of their operations holds, their checkers pass on every state, and each
//! checker catches structures broken on purpose.

use std::collections::BTreeMap;

use pmlab_spine::{Memory, VecMemory};
use pmlab_tx::{Area, Protocol, RedoProtocol, UndoProtocol};
use pmlab_workloads::{Contents, Dist, Kind, Ops, Params, Workload, key_of};

const LOG: Area = Area::new(0, 256 * 1024);

fn params(kind: Kind, dist: Dist) -> Params {
    let elements = match kind {
        // Enough pairs for several levels of 200-pair and 35-row nodes.
        Kind::BpTree => 1500,
        Kind::Db => 400,
        _ => 300,
    };
    Params {
        elements,
        dist,
        ops_per_tx: kind.default_ops_per_tx(),
    }
}

fn data_area(kind: Kind, p: &Params) -> Area {
    Area::new(LOG.end(), Workload::footprint(kind, p))
}

fn redo(kind: Kind, p: &Params) -> RedoProtocol<VecMemory> {
    let data = data_area(kind, p);
    RedoProtocol::format(VecMemory::new(data.end() as usize), LOG, data).unwrap()
}

fn undo(kind: Kind, p: &Params) -> UndoProtocol<VecMemory> {
    let data = data_area(kind, p);
    UndoProtocol::format(VecMemory::new(data.end() as usize), LOG, data).unwrap()
}

/// Runs `txs` transactions, checking after every `every`; returns the contents after
/// each check.
fn run<P: Protocol>(
    p: &mut P,
    kind: Kind,
    params: &Params,
    seed: u64,
    txs: u64,
    every: u64,
) -> Vec<Contents> {
    let area = data_area(kind, params);
    let mut w = Workload::format(p, kind, params, area).unwrap();
    let mut ops = Ops::new(seed, &w, params);
    let mut out = vec![w.check(p).unwrap()];
    for t in 1..=txs {
        w.run_tx(p, &mut ops).unwrap();
        if t % every == 0 {
            out.push(
                w.check(p)
                    .unwrap_or_else(|e| panic!("{kind} after {t} txs: {e}")),
            );
        }
    }
    out
}

#[test]
fn every_workload_passes_its_checker_under_redo_and_undo_alike() {
    for kind in Kind::ALL {
        for dist in [Dist::Uniform, Dist::Zipf] {
            let params = params(kind, dist);
            let a = run(&mut redo(kind, &params), kind, &params, 11, 400, 50);
            let b = run(&mut undo(kind, &params), kind, &params, 11, 400, 50);
            assert_eq!(a, b, "{kind} {dist:?}: redo and undo disagree");
            assert!(a.last().unwrap().count > 0, "{kind}: empty");
        }
    }
}

/// The map model of a toggle stream: what the map workloads must hold.
fn model_map(kind: Kind, params: &Params, seed: u64, txs: u64) -> Contents {
    let mut p = redo(kind, params);
    let w = Workload::format(&mut p, kind, params, data_area(kind, params)).unwrap();
    let mut ops = Ops::new(seed, &w, params);
    let narrow = |v: u64| {
        if kind == Kind::BpTree {
            v & 0xffff_ffff
        } else {
            v
        }
    };
    let mut m: BTreeMap<u64, u64> = (0..params.elements)
        .map(|i| (key_of(2 * i), 2 * i))
        .collect();
    for _ in 0..txs * u64::from(params.ops_per_tx) {
        let k = key_of(ops.pick());
        if m.remove(&k).is_none() {
            m.insert(k, narrow(ops.value()));
        }
    }
    let mut c = Contents::default();
    for (k, v) in m {
        c.add(k, narrow(v));
    }
    c
}

#[test]
fn the_maps_hold_what_a_plain_map_holds() {
    for kind in [Kind::HashTable, Kind::RbTree, Kind::BTree, Kind::BpTree] {
        for dist in [Dist::Uniform, Dist::Zipf] {
            let params = params(kind, dist);
            let got = run(&mut redo(kind, &params), kind, &params, 5, 600, 600);
            assert_eq!(
                *got.last().unwrap(),
                model_map(kind, &params, 5, 600),
                "{kind} {dist:?}"
            );
        }
    }
}

#[test]
fn sps_holds_what_a_plain_array_holds() {
    let params = params(Kind::Sps, Dist::Uniform);
    let mut p = redo(Kind::Sps, &params);
    let mut w =
        Workload::format(&mut p, Kind::Sps, &params, data_area(Kind::Sps, &params)).unwrap();
    let mut ops = Ops::new(3, &w, &params);
    let mut model = ops.clone();
    for _ in 0..500 {
        w.run_tx(&mut p, &mut ops).unwrap();
    }
    let mut a: Vec<u64> = (0..params.elements).collect();
    for _ in 0..500 {
        let (i, j) = (model.pick(), model.pick());
        a.swap(i as usize, j as usize);
    }
    let mut c = Contents::default();
    for (i, v) in a.iter().enumerate() {
        c.add(i as u64, *v);
    }
    assert_eq!(w.check(&mut p).unwrap(), c);
}

/// Builds a workload, lets `corrupt` change bytes of the data area behind the
/// protocol's back, and returns the checker's verdict.
fn corrupted(kind: Kind, corrupt: impl FnOnce(&mut VecMemory, u64)) -> Result<Contents, String> {
    let params = params(kind, Dist::Uniform);
    let mut p = redo(kind, &params);
    let area = data_area(kind, &params);
    let mut w = Workload::format(&mut p, kind, &params, area).unwrap();
    let mut ops = Ops::new(9, &w, &params);
    for _ in 0..100 {
        w.run_tx(&mut p, &mut ops).unwrap();
    }
    w.check(&mut p)
        .expect("the structure is sound before the corruption");
    // Behind the protocol's back (a recovery now would replay the last transaction
    // over the corruption: the redo log vouches for what it wrote).
    corrupt(p.memory_mut(), area.base);
    w.check(&mut p).map_err(|e| e.to_string())
}

fn read(m: &mut VecMemory, a: u64) -> u64 {
    m.read_u64(a).unwrap()
}

/// State word `i` of the header, and the structure's first byte.
const STATE: u64 = 64;
const BODY: u64 = 256;

#[test]
fn each_checker_catches_a_leaked_node() {
    // Pool state words: (free, bump) at these state indices.
    for (kind, pool) in [
        (Kind::HashTable, 1),
        (Kind::RbTree, 2),
        (Kind::BTree, 2),
        (Kind::BpTree, 2),
        (Kind::Sdg, 1),
        (Kind::Db, 2),
    ] {
        let e = corrupted(kind, |m, base| {
            let bump = base + STATE + 8 * (pool + 1);
            let b = read(m, bump);
            m.write_u64(bump, b + 1).unwrap();
        })
        .unwrap_err();
        assert!(e.contains("leak"), "{kind}: {e}");
    }
}

#[test]
fn each_checker_catches_a_wrong_count() {
    for (kind, count) in [
        (Kind::HashTable, 0),
        (Kind::RbTree, 1),
        (Kind::BTree, 1),
        (Kind::BpTree, 1),
        (Kind::Sdg, 0),
        (Kind::Db, 1),
    ] {
        let e = corrupted(kind, |m, base| {
            let at = base + STATE + 8 * count;
            let c = read(m, at);
            m.write_u64(at, c + 1).unwrap();
        })
        .unwrap_err();
        assert!(e.contains("count"), "{kind}: {e}");
    }
}

#[test]
fn sps_checker_catches_half_a_swap() {
    let e = corrupted(Kind::Sps, |m, base| {
        let v = read(m, base + BODY + 8);
        m.write_u64(base + BODY, v).unwrap();
    })
    .unwrap_err();
    assert!(e.contains("not a permutation"), "{e}");
}

#[test]
fn hashtable_checker_catches_a_key_in_the_wrong_bucket() {
    let e = corrupted(Kind::HashTable, |m, base| {
        // The first non-empty bucket's first node: change its key.
        let node = (0..)
            .map(|b| read(m, base + BODY + 8 * b))
            .find(|&n| n != 0)
            .unwrap();
        let k = read(m, node);
        m.write_u64(node, k ^ (1 << 63)).unwrap();
    })
    .unwrap_err();
    assert!(e.contains("not its own") || e.contains("twice"), "{e}");
}

#[test]
fn rbtree_checker_catches_a_red_root_and_disorder() {
    let root = |m: &mut VecMemory, base| read(m, base + STATE);
    let e = corrupted(Kind::RbTree, |m, base| {
        let r = root(m, base);
        m.write_u64(r + 40, 1).unwrap();
    })
    .unwrap_err();
    assert!(e.contains("root is red"), "{e}");
    let e = corrupted(Kind::RbTree, |m, base| {
        let r = root(m, base);
        let left = read(m, r + 16);
        let k = read(m, r);
        m.write_u64(left, k + 1).unwrap();
    })
    .unwrap_err();
    assert!(e.contains("search order"), "{e}");
    // One more black node on one side: the black heights differ.
    let e = corrupted(Kind::RbTree, |m, base| {
        let r = root(m, base);
        let mut n = read(m, r + 16);
        while read(m, n + 16) != 0 {
            n = read(m, n + 16);
        }
        let red = read(m, n + 40);
        m.write_u64(n + 40, 1 - red).unwrap();
    })
    .unwrap_err();
    assert!(e.contains("black") || e.contains("red"), "{e}");
}

#[test]
fn btree_checkers_catch_disorder_and_underfull_nodes() {
    for kind in [Kind::BTree, Kind::BpTree, Kind::Db] {
        let e = corrupted(kind, |m, base| {
            let r = read(m, base + STATE);
            // Swap the root's first two keys (B-tree: 8-byte keys at +16; B+-tree nodes
            // hold keys at +16 too, of the tree's key size).
            let ks = match kind {
                Kind::Db => 16,
                _ => 8,
            };
            let mut a = vec![0u8; ks];
            let mut b = vec![0u8; ks];
            m.read(r + 16, &mut a).unwrap();
            m.read(r + 16 + ks as u64, &mut b).unwrap();
            m.write(r + 16, &b).unwrap();
            m.write(r + 16 + ks as u64, &a).unwrap();
        })
        .unwrap_err();
        assert!(e.contains("out of order"), "{kind}: {e}");
    }
    let e = corrupted(Kind::BpTree, |m, base| {
        // The root's first child: claim it holds 3 keys.
        let r = read(m, base + STATE);
        let kid = read(m, r + 16 + 200 * 8);
        m.write(kid + 4, &3u32.to_le_bytes()).unwrap();
    })
    .unwrap_err();
    assert!(e.contains("3 keys (allowed 100 to 200)"), "{e}");
}

#[test]
fn bptree_checker_catches_a_broken_leaf_chain() {
    let e = corrupted(Kind::BpTree, |m, base| {
        let r = read(m, base + STATE);
        let kid = read(m, r + 16 + 200 * 8);
        m.write_u64(kid + 8, 0).unwrap();
    })
    .unwrap_err();
    assert!(e.contains("leaf chain"), "{e}");
}

#[test]
fn sdg_checker_catches_a_one_sided_edge() {
    let e = corrupted(Kind::Sdg, |m, base| {
        // The first vertex with a neighbour: drop one from its head block, fixing the
        // block's count and the degree so that only symmetry is broken.
        let (v, head) = (0..)
            .map(|u| (u, read(m, base + BODY + 16 * u)))
            .find(|&(_, h)| h != 0)
            .unwrap();
        let n = read(m, head + 8);
        if n > 1 {
            m.write_u64(head + 8, n - 1).unwrap();
            let d = read(m, base + BODY + 16 * v + 8);
            m.write_u64(base + BODY + 16 * v + 8, d - 1).unwrap();
        } else {
            let nb = read(m, head + 16);
            m.write_u64(head + 16, (nb + 1) % 300).unwrap();
        }
    })
    .unwrap_err();
    assert!(e.contains("one endpoint") || e.contains("twice"), "{e}");
}

#[test]
fn db_checker_catches_a_malformed_row_key() {
    let e = corrupted(Kind::Db, |m, base| {
        let r = read(m, base + STATE);
        let mut leaf = r;
        while m.read_u64(leaf).unwrap() & 0xff != 1 {
            leaf = read(m, leaf + 16 + 169 * 16);
        }
        // The first key's first digit becomes a slash (still sorted first).
        let mut k = [0u8; 16];
        m.read(leaf + 16, &mut k).unwrap();
        k[0] = b'/';
        m.write(leaf + 16, &k).unwrap();
    })
    .unwrap_err();
    assert!(e.contains("16 decimal digits"), "{e}");
}

#[test]
fn the_wrong_workload_and_a_small_area_are_refused() {
    let params = params(Kind::RbTree, Dist::Uniform);
    let mut p = redo(Kind::RbTree, &params);
    let area = data_area(Kind::RbTree, &params);
    Workload::format(&mut p, Kind::RbTree, &params, area).unwrap();
    let e = Workload::open(&mut p, Kind::BTree, area)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("field `workload`") && e.contains("\"rbtree\""),
        "{e}"
    );
    let small = Area::new(area.base, area.len / 2);
    let e = Workload::open(&mut p, Kind::RbTree, small)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("field `footprint`"), "{e}");
    let mut q = redo(Kind::RbTree, &params);
    let e = Workload::format(
        &mut q,
        Kind::RbTree,
        &Params {
            elements: 10_000,
            ..params
        },
        area,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("cannot hold 10000 elements"), "{e}");
}
