// Rule 2: a pointer into a process-private segment is stored into a global segment.
use pmlab_vas::brand::{enter, SegPtr, Global, Private};
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{SegId, VasHandle};

fn main() {
    let mut s: NativeSpaces = todo!();
    let a: VasHandle = todo!();
    let _ = enter(&mut s, a, |v| {
        let slot = v.global::<SegPtr<u64, Private>>(SegId(1), 0).unwrap();
        let q = v.private::<u64>(SegId(2), 0).unwrap();
        slot.store_ptr(v, q);
    });
}
