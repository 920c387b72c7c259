//! Threads of one process sharing a KVFS store put, erase and get the same keys while
//! another client puts them too, taking the keys' bucket leases away and back: no put
//! is refused, and every get returns a whole version of its own key's value.
//!
//! Two faults of libFS made it fail:
//! - The store's threads ask for the bucket's lease at once, some shared (a get) and
//!   some exclusive (a put). A shared grant replaced the exclusive lease a put was
//!   recording under, and libFS's check (or the service) refused the put, "the client
//!   holds no lease covering inode N": five runs of six failed so. Grants now keep the
//!   stronger lease (`lease::Leases::grant`, `client::leases`).
//! - A lease granted anew was used at once, by any thread, through pages read before
//!   the grant: an inode-table page in libFS's overlay (changed for a key of another
//!   bucket, whose lease it kept) showed an inode the other client made meanwhile as
//!   free, "inode N is a Free, not a file" or "kN is not a KVFS object": one run in ten
//!   failed so. A new grant now covers nothing until the thread that asked for it has
//!   shipped and dropped the overlay and forgotten what was read before
//!   (`LeaseTable::settle`); without the ship two runs of forty failed, without the
//!   wait three.

use std::sync::atomic::{AtomicBool, Ordering};

use pmlab_fs::kvfs::Kvfs;
use pmlab_fs::layout::Params;
use pmlab_fs::service;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

mod support;

/// A small volume: 8 KiB objects in a domain of 2,048, so that extents freed by puts
/// and erases are handed out again within a few rounds of the stress test.
fn params() -> Params {
    Params {
        meta_pages: 4096,
        inodes: 31 * 64,
        log_pages: 400,
        max_domains: 8,
        domain_pages: 4096,
        kv_object_pages: 2,
        volume_id: 13,
    }
}

/// A fresh volume of this test's geometry on tmpfs (where copies run outside the
/// state), served on its `sock`.
fn serve() -> (tempfile::TempDir, service::Handle) {
    support::shm::serve(&params())
}

fn open(tmp: &tempfile::TempDir) -> Kvfs {
    Kvfs::open(&tmp.path().join("sock"), "/kv", 0o644).unwrap()
}

/// Version `v` of key `k`'s value: `1 + v % 1024` words, each `k << 32 | v`.
fn value(k: u32, v: u32) -> Vec<u8> {
    let word = (u64::from(k) << 32 | u64::from(v)).to_le_bytes();
    word.repeat(1 + (v % 1024) as usize)
}

/// Whether `bytes` is some version of key `k`'s value, whole.
fn is_a_version_of(k: u32, bytes: &[u8]) -> Result<(), String> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(8) {
        return Err(format!("key {k}: {} bytes, not whole words", bytes.len()));
    }
    let first = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let (key, v) = ((first >> 32) as u32, first as u32);
    if key != k {
        return Err(format!("key {k} holds a word of key {key}"));
    }
    if bytes != value(k, v) {
        return Err(format!(
            "key {k}: not version {v} whole ({} bytes)",
            bytes.len()
        ));
    }
    Ok(())
}

const KEYS: u32 = 24;
const ROUNDS: u32 = 10_000;

/// `rounds` seeded puts (and one erase in eight) of the keys, as writer `id`.
fn writer(id: u32, kv: &Kvfs, rounds: u32) -> Result<(), String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(u64::from(id));
    for round in 0..rounds {
        let k = rng.gen_range(0..KEYS);
        let key = format!("k{k}");
        if rng.gen_range(0..8) == 0 {
            kv.erase(&key)
                .map_err(|e| format!("writer {id}: erase {key}: {e}"))?;
        } else {
            kv.put(&key, &value(k, id << 24 | round))
                .map_err(|e| format!("writer {id}: put {key}: {e}"))?;
        }
    }
    Ok(())
}

/// Seeded gets of the keys until `stop`, each checked to be a whole version of its key.
fn reader(seed: u64, kv: &Kvfs, stop: &AtomicBool) -> Result<(), String> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut buf = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let k = rng.gen_range(0..KEYS);
        let found = kv
            .get_into(&format!("k{k}"), &mut buf)
            .map_err(|e| format!("get k{k}: {e}"))?;
        if found {
            is_a_version_of(k, &buf)?;
        }
    }
    Ok(())
}

/// Two threads of one store put and erase a few keys and three get them, while a
/// second client puts the same keys (each of its puts takes a bucket's lease from the
/// store, which takes it back after): no put is refused, and every get returns some
/// whole version of its own key's value.
#[test]
fn threads_of_a_store_and_another_client_put_and_get_the_same_keys() {
    let (tmp, svc) = serve();
    let (kv, other) = (open(&tmp), open(&tmp));
    let stop = AtomicBool::new(false);
    let errors: Vec<String> = std::thread::scope(|s| {
        // The other client works a third of the rounds: each of its puts takes a
        // bucket's lease from the store, which takes it back after.
        let writers = [
            s.spawn(|| writer(1, &kv, ROUNDS)),
            s.spawn(|| writer(2, &kv, ROUNDS)),
            s.spawn(|| writer(3, &other, ROUNDS / 3)),
        ];
        let readers: Vec<_> = (10..13)
            .map(|seed| {
                let (kv, stop) = (&kv, &stop);
                s.spawn(move || reader(seed, kv, stop))
            })
            .collect();
        let mut errors: Vec<String> = writers
            .into_iter()
            .filter_map(|h| h.join().unwrap().err())
            .collect();
        stop.store(true, Ordering::SeqCst);
        errors.extend(readers.into_iter().filter_map(|h| h.join().unwrap().err()));
        errors
    });
    assert!(errors.is_empty(), "{errors:#?}");
    drop((kv, other));
    svc.stop().unwrap();
}

/// A get into the caller's array (`Kvfs::get_to`) fills what fits, leaves the rest of
/// the array alone and says how long the value is, both through libFS's state and
/// through its caches under the shared state: on tmpfs, where copies run outside the
/// state, the first get of a key fills the caches and the next ones are served from
/// them.
#[test]
fn a_get_into_the_callers_array_fills_what_fits_through_the_caches_too() {
    let (tmp, svc) = serve();
    let kv = open(&tmp);
    let long = value(1, 1000);
    kv.put("long", &long).unwrap();
    kv.put("short", b"eight by").unwrap();
    kv.sync().unwrap();
    for round in 0..3 {
        let mut part = [1u8; 100];
        assert_eq!(kv.get_to("long", &mut part).unwrap(), Some(long.len()));
        assert_eq!(part[..], long[..100], "round {round}");
        let mut wide = vec![1u8; long.len() + 64];
        assert_eq!(kv.get_to("long", &mut wide).unwrap(), Some(long.len()));
        assert_eq!(wide[..long.len()], long[..], "round {round}");
        assert!(wide[long.len()..].iter().all(|&x| x == 1), "round {round}");
        assert_eq!(kv.get_to("short", &mut wide).unwrap(), Some(8));
        assert_eq!(&wide[..8], b"eight by");
        assert_eq!(kv.get_to("none", &mut wide).unwrap(), None);
    }
    drop(kv);
    svc.stop().unwrap();
}
