// Rule 1: while switched away from v (inside v.switch), v's token is borrowed, so a
// pointer of v cannot be dereferenced with it.
use pmlab_vas::brand::{enter, Active, VPtr, Global};
use pmlab_vas::native::NativeSpaces;
use pmlab_vas::{SegId, VasHandle};

fn main() {
    let mut s: NativeSpaces = todo!();
    let (a, b): (VasHandle, VasHandle) = todo!();
    let _ = enter(&mut s, a, |v: &mut Active<'_>| {
        let p: VPtr<'_, u64, Global> = v.global(SegId(1), 0).unwrap();
        let _ = v.switch(b, |_w| p.get(v));
    });
}
