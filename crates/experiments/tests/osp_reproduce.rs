//! `pmlab reproduce osp` end to end at a tiny size: every file is written, `osp.json`
//! has the fields the issue names for every paper workload, and the protocols agree
//! on what they must agree on.

use pmlab_experiments::osp::{Config, reproduce};

#[test]
fn the_reproduction_writes_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::quick(dir.path().to_path_buf());
    c.sps_elements = 1 << 14;
    c.map_elements = 1 << 11;
    c.warmup = 20;
    c.txs = 200;
    c.crash_txs = 0;
    c.large_tx_ops = 8;
    c.large_txs = 10;
    c.progress = false;
    let report = reproduce(&c).unwrap();
    report.write(&c).unwrap();
    for f in [
        "figure4a.csv",
        "figure4b.csv",
        "table1.csv",
        "superpage.csv",
        "future.csv",
        "large-transactions.csv",
        "targets.csv",
        "osp.json",
        "figure4a.svg",
        "figure4b.svg",
        "table1.svg",
    ] {
        assert!(dir.path().join(f).exists(), "{f} missing");
    }
    // Each table in its own file.
    for (f, header) in [
        ("figure4a.csv", "workload,undo,OSP"),
        ("table1.csv", ",uniform,paper uniform"),
        ("large-transactions.csv", "protocol,ops/tx"),
        ("crash.csv", "workload,protocol,txs"),
        ("broken.csv", "variant,caught on"),
        ("targets.csv", "target,measured,met"),
    ] {
        let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(
            text.starts_with(header),
            "{f}: {}",
            text.lines().next().unwrap_or("")
        );
    }
    let text = std::fs::read_to_string(dir.path().join("osp.json")).unwrap();
    let j: serde_json::Value = serde_json::from_str(&text).unwrap();
    let names = [
        "SPS", "HT-uni", "RBT-uni", "BT-uni", "HT-zipf", "RBT-zipf", "BT-zipf",
    ];
    let w = j["workloads"].as_object().unwrap();
    assert_eq!(w.len(), names.len());
    for n in names {
        let x = &w[n];
        let undo = x["undo_flushes"].as_f64().unwrap();
        let osp = x["osp_flushes"].as_f64().unwrap();
        let s = &x["osp_flushes_by_source"];
        let parts: f64 = ["data", "journal", "consolidation"]
            .iter()
            .map(|k| s[k].as_f64().unwrap())
            .sum();
        assert!(
            (parts - osp).abs() < 1e-9,
            "{n}: sources add up to the total"
        );
        // The same operations update the same lines under both protocols.
        assert_eq!(s["data"], x["undo_flushes_by_source"]["data"], "{n}");
        // The undo log: one entry and one data flush per line, one commit mark.
        let u = &x["undo_flushes_by_source"];
        assert_eq!(u["log"], u["data"], "{n}");
        assert!((u["commit"].as_f64().unwrap() - 1.0).abs() < 1e-9, "{n}");
        assert!(undo > 0.0 && osp > 0.0);
        let r = x["tlb_miss_ratio"].as_f64().unwrap();
        assert!(r > 0.0 && r < 1.0, "{n}: {r}");
    }
    assert!(j["avg_flush_reduction"].as_f64().unwrap() > 0.0);
    assert_eq!(j["large_transactions"].as_array().unwrap().len(), 2);
    assert!(report.checks[0].starts_with("every protocol flushed exactly the same data lines"));
}
