//! Machine configurations read from TOML meet mutated and arbitrary text: each is a
//! buildable machine or an error naming the file and where (the line and column `toml`
//! reports, or the field), never a panic (cases: `PROPTEST_CASES`, default 256).

use pmlab_model::{ChaosConfig, DeviceConfig, Machine, MachineConfig, TlbConfig};
use pmlab_testkit::alloc::{Counting, peak_during};
use pmlab_testkit::fuzz_config;
use proptest::prelude::*;

#[global_allocator]
static ALLOC: Counting = Counting;

/// A configuration with every optional part present, so that mutations reach them all.
fn full_text() -> String {
    let mut c = MachineConfig::loc_with(1 << 20, DeviceConfig::preset("pcm").unwrap());
    c.translation.tlb = Some(TlbConfig::default());
    c.chaos = Some(ChaosConfig {
        seed: 3,
        probability: 0.25,
    });
    c.to_toml()
}

/// Values a mutation puts after a key's `=`.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0".to_string()),
        Just("1".to_string()),
        Just("3".to_string()),
        Just("-1".to_string()),
        Just("18446744073709551615".to_string()),
        Just("1e300".to_string()),
        Just("nan".to_string()),
        Just("true".to_string()),
        Just("\"4KiB\"".to_string()),
        Just("\"lru\"".to_string()),
        Just("[]".to_string()),
        (0u32..48).prop_map(|k| (1u64 << k).to_string()),
        "[ -~]{0,8}",
    ]
}

/// One edit of a line: its value replaced, the line dropped, duplicated, or junk added.
fn edit() -> impl Strategy<Value = (prop::sample::Index, u8, String)> {
    (any::<prop::sample::Index>(), 0u8..4, value())
}

fn apply(text: &str, edits: &[(prop::sample::Index, u8, String)]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for (at, kind, v) in edits {
        let i = at.index(lines.len());
        match kind {
            0 => {
                if let Some(eq) = lines[i].find('=') {
                    lines[i] = format!("{}= {v}", &lines[i][..eq]);
                }
            }
            1 => {
                lines.remove(i);
            }
            2 => lines.insert(i, lines[i].clone()),
            _ => lines.insert(i, v.clone()),
        }
        if lines.is_empty() {
            break;
        }
    }
    lines.join("\n")
}

/// An error names the file and where in it.
fn located(e: &str) -> bool {
    e.starts_with("m.toml: ") && (e.contains("line ") || e.contains("field `"))
}

fn check(text: &str) -> Result<(), TestCaseError> {
    match MachineConfig::from_toml("m.toml", text) {
        Ok(cfg) => {
            // Build only what fits this test's memory; the limits bound the rest.
            if cfg.memory_size <= 1 << 30 {
                let (m, peak) = peak_during(|| Machine::new(cfg.clone()));
                prop_assert!(m.is_ok(), "{:?}", m.err());
                prop_assert!(
                    peak as u64
                        <= 2 * cfg.memory_size
                            + (64 << 20)
                            + 2 * cfg.caches.iter().map(|c| c.size).sum::<u64>()
                );
            }
        }
        Err(e) => prop_assert!(located(&e.to_string()), "{}", e),
    }
    Ok(())
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn mutated_configurations(edits in prop::collection::vec(edit(), 1..5)) {
        check(&apply(&full_text(), &edits))?;
    }

    #[test]
    fn arbitrary_text(text in "[ -~\n]{0,200}") {
        check(&text)?;
    }
}
