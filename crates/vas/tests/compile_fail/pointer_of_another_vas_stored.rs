// Rule 2: storing into v a pointer that points into another VAS w.
use pmlab_vas::brand::{enter, SegPtr, Global};
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{SegId, VasHandle};

fn main() {
    let mut s: NativeSpaces = todo!();
    let (a, b): (VasHandle, VasHandle) = todo!();
    let _ = enter(&mut s, a, |v| {
        let slot = v.global::<SegPtr<u64, Global>>(SegId(1), 0).unwrap();
        let _ = v.switch(b, |w| {
            let q = w.global::<u64>(SegId(2), 0).unwrap();
            slot.store_ptr(w, q);
        });
    });
}
