//! Correctness against the real Redis: one recorded mix of SETs and GETs (seeded
//! xoshiro256++: new keys, overwrites with longer and shorter values, GETs of present
//! and missing keys, binary values with CR, LF and NUL) replayed against the store
//! and against a real `redis-server` over its Unix socket must give the same answer to
//! every request. The test fails — it does not skip — where redis-server is missing.

use pmlab_kvjmp::KvStore;
use pmlab_kvjmp::bench::redis::RedisServer;
use pmlab_kvjmp::resp::{Reply, RespClient};
use pmlab_testkit::child;
use pmlab_vas::Mode;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

#[derive(Debug)]
enum Req {
    Set(Vec<u8>, Vec<u8>),
    Get(Vec<u8>),
}

/// The recorded mix: 6000 requests, 40 % SETs, over 1500 keys of which GETs also
/// probe 500 never set.
fn recording(seed: u64) -> Vec<Req> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..6000)
        .map(|_| {
            let key = format!("key:{:012}", rng.gen_range(0..2000u32)).into_bytes();
            if rng.gen_range(0..100) < 40 {
                let len = rng.gen_range(0..60usize);
                let value = (0..len)
                    .map(|_| b"ab\r\n\0xyz "[rng.gen_range(0..9)])
                    .collect();
                Req::Set(key, value)
            } else {
                Req::Get(key)
            }
        })
        .collect()
}

fn replay() {
    let server = RedisServer::start(None, pmlab_kvjmp::bench::redis::Durability::Default)
        .unwrap_or_else(|e| panic!("the real Redis is needed for this test: {e}"));
    let mut redis = RespClient::connect(server.socket()).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("pmlab-kv-redis")
        .tempdir_in("/dev/shm")
        .unwrap();
    let mut store = KvStore::create(dir.path(), "replay", 16 << 20, Mode(0o600), 9).unwrap();
    let (mut sets, mut hits, mut misses) = (0, 0, 0);
    for (i, req) in recording(42).iter().enumerate() {
        match req {
            Req::Set(k, v) => {
                store.set(k, v).unwrap();
                assert_eq!(
                    redis.call(&[b"SET", k, v]).unwrap(),
                    Reply::Status("OK".into()),
                    "request {i}"
                );
                sets += 1;
            }
            Req::Get(k) => {
                let ours = store.get(k).unwrap();
                let theirs = match redis.call(&[b"GET", k]).unwrap() {
                    Reply::Bulk(v) => Some(v),
                    Reply::Nil => None,
                    other => panic!("request {i}: redis replied {other:?}"),
                };
                assert_eq!(
                    ours,
                    theirs,
                    "request {i}: GET {}",
                    String::from_utf8_lossy(k)
                );
                if ours.is_some() {
                    hits += 1
                } else {
                    misses += 1
                }
            }
        }
    }
    assert!(
        sets > 2000 && hits > 500 && misses > 500,
        "{sets} sets, {hits} hits, {misses} misses"
    );
    let report = store.check().unwrap();
    assert_eq!(report.sets, sets);
}

#[test]
fn a_recorded_mix_gets_the_same_answers_from_the_store_and_from_redis() {
    child::branch(|_| replay());
    let out = child::command(
        "a_recorded_mix_gets_the_same_answers_from_the_store_and_from_redis",
        "replay",
    )
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
