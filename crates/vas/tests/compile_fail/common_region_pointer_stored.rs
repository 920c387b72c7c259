// Rule 2: a pointer into the common region (the stack) is stored in a segment.
use pmlab_vas::brand::enter;
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{SegId, VasHandle};

fn main() {
    let mut s: NativeSpaces = todo!();
    let a: VasHandle = todo!();
    let local = 5u64;
    let _ = enter(&mut s, a, |v| {
        let slot = v.global::<&u64>(SegId(1), 0).unwrap();
        slot.set(v, &local);
    });
}
