//! The journal libFS has recorded and not yet shipped: groups of operations, each
//! after the [`Op::Stamp`] of the time its local check stamped them with.

use crate::journal::Op;

/// Recorded records in order, with a count of the operations among them (the stamps
/// not counted), kept as they are added so that deciding when to ship reads no record.
#[derive(Default)]
pub struct Recorded {
    records: Vec<Op>,
    ops: usize,
}

impl Recorded {
    /// Adds `ops`, checked at time `now`, after a stamp of that time.
    pub fn push(&mut self, now: u64, ops: Vec<Op>) {
        self.records.push(Op::Stamp { now });
        self.ops += ops.len();
        self.records.extend(ops);
    }

    /// The operations recorded, the stamps not counted.
    pub fn ops(&self) -> usize {
        self.ops
    }

    /// Forgets everything recorded (it was shipped).
    pub fn clear(&mut self) {
        self.records.clear();
        self.ops = 0;
    }
}

impl std::ops::Deref for Recorded {
    type Target = [Op];

    fn deref(&self) -> &[Op] {
        &self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_operations_not_stamps() {
        let mut r = Recorded::default();
        let size = |ino| Op::SetSize { ino, size: 1 };
        r.push(7, vec![size(1), size(2)]);
        r.push(9, vec![size(3)]);
        assert_eq!(r.ops(), 3);
        assert_eq!(r.len(), 5);
        assert_eq!(r[0], Op::Stamp { now: 7 });
        assert_eq!(r[3], Op::Stamp { now: 9 });
        r.clear();
        assert_eq!((r.ops(), r.len()), (0, 0));
    }
}
