//! Benchmark volumes: one the scratch directory has no room for is refused up front.

use pmlab_fs::FsError;
use pmlab_fscheck::bench::ops::{FileOps, PxfsVolume, VolumeSize};

/// A volume far larger than any scratch directory's room is refused with the sizes and
/// what to change, and leaves nothing behind; without the check it went on to make the
/// volume's files (on a tmpfs, populating them until the out-of-memory killer ended
/// the run).
#[test]
fn a_volume_without_room_is_refused_before_anything_is_made() {
    let scratch = tempfile::tempdir().unwrap();
    let huge = VolumeSize {
        data_bytes: 1 << 50,
        inodes: 1024,
        kv_object_bytes: 4096,
    };
    let err = PxfsVolume::create(scratch.path(), huge)
        .err()
        .expect("a volume of a PiB was made");
    let FsError::NoSpace(why) = &err else {
        panic!("refused for another reason: {err}")
    };
    assert!(
        why.contains("does not fit") && why.contains("MiB free"),
        "{why}"
    );
    let left: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
}

/// A volume that fits is made as before.
#[test]
fn a_volume_with_room_is_made() {
    let scratch = tempfile::tempdir().unwrap();
    let small = VolumeSize {
        data_bytes: 1 << 20,
        inodes: 64,
        kv_object_bytes: 4096,
    };
    let mut vol = PxfsVolume::create(scratch.path(), small).unwrap();
    let h = vol.create("/f").unwrap();
    vol.close(h).unwrap();
    vol.destroy().unwrap();
}
