//! Property tests of the Dinero IV flag parser: arbitrary command lines end in a
//! configuration or an error naming the flag at fault, never a panic or an unbounded
//! allocation (cases: `PROPTEST_CASES`, default 256); every valid hierarchy survives the
//! trip to flags and back.

use pmlab_cache::dinero_args::{DineroArgs, hierarchy_flags};
use pmlab_testkit::alloc::{Counting, peak_during};
use pmlab_testkit::fuzz_config;

#[global_allocator]
static ALLOC: Counting = Counting;
use pmlab_cache::{CacheConfig, HierarchyConfig, Level, Replacement};
use proptest::prelude::*;

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        // Plausible flags with plausible or mangled levels, sides and fields.
        (
            0u8..8,
            prop::sample::select(vec!['u', 'i', 'd', 'x', '-']),
            prop::sample::select(vec![
                "size", "bsize", "sbsize", "assoc", "repl", "fetch", "walloc", "wback", "ccc",
                "pfdist", "pfabort", "bogus", ""
            ])
        )
            .prop_map(|(l, t, f)| format!("-l{l}-{t}{f}")),
        prop::sample::select(vec![
            "-help",
            "-informat",
            "-maxcount",
            "-skipcount",
            "-flushcount",
            "-stat-interval",
            "-on-trigger",
            "-off-trigger",
            "-stat-idcombine",
            "-seed",
            "-custom",
            "-l",
            "-l1",
            "-l1-",
            "--",
            "-"
        ])
        .prop_map(String::from),
        // Values: numbers with suffixes, letters, junk.
        (
            0u64..1 << 40,
            prop::sample::select(vec!["", "k", "K", "m", "g", "x", "kk"])
        )
            .prop_map(|(n, s)| format!("{n}{s}")),
        prop::sample::select(vec![
            "l",
            "f",
            "r",
            "p",
            "a",
            "n",
            "d",
            "D",
            "0x0",
            "0x10",
            "18446744073709551616",
            "99999999999999999999g"
        ])
        .prop_map(String::from),
        ".{0,12}",
    ]
}

fn cache(t: char) -> impl Strategy<Value = CacheConfig> {
    (
        2u32..8,
        10u32..22,
        0u32..4,
        0usize..4,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_filter_map("ways exceed size", move |(lb, ls, la, r, wb, wa, ccc)| {
            let block_size = 1u64 << lb;
            let size = 1u64 << ls;
            let assoc = 1u64 << la;
            (block_size * assoc <= size).then(|| CacheConfig {
                size,
                block_size,
                assoc,
                repl: [
                    Replacement::Lru,
                    Replacement::Fifo,
                    Replacement::Random,
                    Replacement::TreePlru,
                ][r],
                // An instruction cache keeps Dinero IV's (unprinted) defaults.
                write_back: wb || t == 'i',
                write_allocate: wa || t == 'i',
                ccc,
            })
        })
}

fn hierarchy() -> impl Strategy<Value = HierarchyConfig> {
    (0usize..=3, 1usize..=5).prop_flat_map(|(split_levels, n)| {
        let split_levels = split_levels.min(n);
        let levels: Vec<BoxedStrategy<Level>> = (0..n)
            .map(|i| {
                if i < split_levels {
                    (cache('i'), cache('d'))
                        .prop_map(|(instr, data)| Level::Split { instr, data })
                        .boxed()
                } else {
                    cache('u').prop_map(Level::Unified).boxed()
                }
            })
            .collect();
        levels.prop_map(|levels| HierarchyConfig { levels })
    })
}

/// Whether an error message names where the command line is wrong: a flag given, a
/// cache flag (`-lN-...`) or a level.
fn names_a_place(message: &str, args: &[String]) -> bool {
    message.contains("-l")
        || message.contains("level")
        || args.iter().any(|a| {
            message.contains(&format!("{a:?}")) || (a.len() > 1 && message.contains(a.as_str()))
        })
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn random_command_lines_are_parsed_or_refused_by_flag(args in prop::collection::vec(token(), 0..12)) {
        let (parsed, peak) = peak_during(|| DineroArgs::parse(&args));
        if let Err(e) = parsed {
            let m = e.to_string();
            prop_assert!(names_a_place(&m, &args), "{:?}: {}", args, m);
        }
        prop_assert!(peak < 1 << 20, "parsing {} words allocated {} bytes", args.len(), peak);
    }

    #[test]
    fn valid_hierarchies_round_trip(h in hierarchy()) {
        let flags = hierarchy_flags(&h);
        let parsed = DineroArgs::parse(&flags).map_err(|e| TestCaseError::fail(format!("{flags:?}: {e}")))?;
        prop_assert_eq!(parsed.hierarchy, h);
    }
}
