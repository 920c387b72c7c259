//! Every counter pmlab prints equals Dinero IV's, for the 3 traces x 7 configurations of
//! the validation set (`data/validation/dinero`).

mod support;

use pmlab_cache::{DineroArgs, Hierarchy, report};

/// The per-cache tables of a Dinero IV output: from "---Simulation complete." to
/// "---Execution complete.".
fn tables(out: &str) -> &str {
    let start = out
        .find("---Simulation complete.\n")
        .expect("complete marker")
        + 24;
    let end = out
        .find("---Execution complete.")
        .expect("execution marker");
    &out[start..end]
}

fn summary(out: &str) -> &str {
    let start = out.find("information).\n\n").expect("summary") + 15;
    let end = out.find("\n---Simulation begins.").expect("begins");
    &out[start..end]
}

#[test]
fn all_traces_all_configs_match_dinero_iv() {
    let dir = support::validation_dir();
    let mut failures = Vec::new();
    let mut passed = 0;
    for trace in ["sort", "xz", "python"] {
        let refs = support::load_trace(trace);
        assert_eq!(refs.len(), 4_000_000);
        for (name, mut flags) in support::configs() {
            flags.extend(["-informat".to_string(), "D".to_string()]);
            let args = DineroArgs::parse(&flags).expect("valid flags");
            let mut h = Hierarchy::new(&args.hierarchy, args.seed).expect("valid hierarchy");
            h.run(&refs);
            h.finish();
            let got = report::render_all(&h.stats(), false);
            let expected_path = dir.join("expected").join(format!("{trace}.{name}.out"));
            let expected = std::fs::read_to_string(&expected_path).expect("expected output");
            let mut ok = true;
            if got != tables(&expected) {
                ok = false;
                failures.push(format!(
                    "{trace}.{name}: tables differ\n--- expected\n{}\n--- pmlab\n{got}",
                    tables(&expected)
                ));
            }
            if args.summary().trim_end() != summary(&expected).trim_end() {
                ok = false;
                failures.push(format!(
                    "{trace}.{name}: summary differs\n--- expected\n{}\n--- pmlab\n{}",
                    summary(&expected),
                    args.summary()
                ));
            }
            passed += usize::from(ok);
        }
    }
    assert!(
        failures.is_empty(),
        "{passed}/21 passed\n{}",
        failures.join("\n")
    );
    assert_eq!(passed, 21);
}
