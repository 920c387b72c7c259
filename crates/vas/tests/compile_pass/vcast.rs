// The explicit escape: `vcast` re-brands a pointer for another VAS (unsafe: the
// programmer vouches that the pointee is mapped there at the same address).
use pmlab_vas::brand::enter;
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{SegId, VasHandle};

#[allow(dead_code, unreachable_code, unused_variables)]
fn cast(mut s: NativeSpaces, a: VasHandle, b: VasHandle) {
    let _ = enter(&mut s, a, |v| {
        let p = v.global::<u64>(SegId(1), 0).unwrap();
        let _ = v.switch(b, |w| unsafe { p.vcast(w) }.get(w));
    });
}

fn main() {}
