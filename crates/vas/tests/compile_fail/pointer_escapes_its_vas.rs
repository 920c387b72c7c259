// Rule 1: a pointer of v cannot outlive the time v is active.
use pmlab_vas::brand::{enter, Global};
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{SegId, VasHandle};

fn main() {
    let mut s: NativeSpaces = todo!();
    let a: VasHandle = todo!();
    let p = enter(&mut s, a, |v| v.global::<u64>(SegId(1), 0).unwrap()).unwrap();
    let _ = p;
}
