// Rule 1: a pointer obtained in VAS v is dereferenced with the token of VAS w.
use pmlab_vas::brand::{enter, Active, VPtr, Global};
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{SegId, VasHandle};

fn main() {
    let mut s: NativeSpaces = todo!();
    let (a, b): (VasHandle, VasHandle) = todo!();
    let _ = enter(&mut s, a, |v: &mut Active<'_>| {
        let p: VPtr<'_, u64, Global> = v.global(SegId(1), 0).unwrap();
        let _ = v.switch(b, |w: &mut Active<'_>| p.get(w));
    });
}
