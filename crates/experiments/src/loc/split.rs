//! A protocol's cycles beyond the baseline's, split into the named parts of the two
//! runs' cycle ledgers (`pmlab_hwtx::CycleLedger`): each part is the protocol's cycles
//! of that kind minus the baseline's, so the parts sum to the difference exactly (both
//! ledgers' totals are their runs' cycles), and a part may be negative (fewer cycles
//! of that kind than the baseline spent).

use serde_json::{Value, json};

use super::run::RunResult;

/// The names of the parts, in order (the ledger's: compute, instructions, each level
/// and memory, the read queue, each persistence wait).
pub fn part_names(r: &RunResult) -> Vec<String> {
    r.ledger.parts().into_iter().map(|(n, _)| n).collect()
}

/// `(name, protocol's cycles minus the baseline's)` for each part, over the measured
/// transactions (integers: exact).
pub fn extra_parts(base: &RunResult, p: &RunResult) -> Vec<(String, i64)> {
    base.ledger
        .parts()
        .into_iter()
        .zip(p.ledger.parts())
        .map(|((n, b), (_, x))| (n, x as i64 - b as i64))
        .collect()
}

/// The protocol's accesses served by each level minus the baseline's (`l1`, ...,
/// `memory`), over the measured transactions.
pub fn extra_served(base: &RunResult, p: &RunResult) -> Vec<i64> {
    base.ledger
        .served
        .iter()
        .zip(&p.ledger.served)
        .map(|(&b, &x)| x as i64 - b as i64)
        .collect()
}

/// The split as JSON: totals over the measured transactions, so a reader can check
/// that the parts sum to `extra_cycles` exactly.
pub fn json(base: &RunResult, p: &RunResult) -> Value {
    let parts = extra_parts(base, p);
    let sum: i64 = parts.iter().map(|(_, c)| c).sum();
    let mut o = serde_json::Map::new();
    for (n, c) in &parts {
        o.insert(n.clone(), json!(c));
    }
    json!({
        "transactions": p.committed_tx,
        "extra_cycles": p.cycles as i64 - base.cycles as i64,
        "sum_of_parts": sum,
        "parts": Value::Object(o),
        "extra_accesses_served": extra_served(base, p),
    })
}
