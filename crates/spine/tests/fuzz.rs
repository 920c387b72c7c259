//! Sizes and page sizes as people write them meet arbitrary text: each is a value or an
//! error quoting the input and saying what is wrong, never a panic (cases:
//! `PROPTEST_CASES`, default 256).

use pmlab_spine::{PageSize, parse_size};
use pmlab_testkit::fuzz_config;
use proptest::prelude::*;

/// Text that looks like a size often and like nothing sometimes.
fn sizeish() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            "[0-9]{0,22}",
            "(|[kKmMgGtT]|[kKmMgGtT]i?[bB]|B| |[a-z]{1,3})"
        )
            .prop_map(|(n, u)| n + &u),
        ".{0,12}",
    ]
}

proptest! {
    #![proptest_config(fuzz_config())]

    #[test]
    fn sizes_parse_or_quote_the_input(text in sizeish()) {
        match parse_size(&text) {
            Ok(n) => {
                // A value came from the digits at the front, scaled by a power of 1024.
                let digits: String = text.trim().chars().take_while(char::is_ascii_digit).collect();
                let d: u64 = digits.parse().unwrap();
                prop_assert!(n >= d && (d == 0 || (n / d).is_power_of_two()));
            }
            Err(e) => prop_assert!(e.contains(&format!("{text:?}")), "{}", e),
        }
    }

    #[test]
    fn page_sizes_are_powers_of_two_in_range_or_refused(text in sizeish()) {
        match text.parse::<PageSize>() {
            Ok(p) => prop_assert!(p.bytes().is_power_of_two() && (512..=1 << 30).contains(&p.bytes())),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }
}
