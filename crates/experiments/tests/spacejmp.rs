//! The SpaceJMP reproduction end to end at tiny sizes: every GUPS design on both
//! substrates computes the reference table (checked inside the run: a wrong window
//! checksum is an error), and `spacejmp.json` has the fields the issue names.

use pmlab_experiments::spacejmp::{Config, reproduce};

#[test]
fn a_tiny_reproduction_writes_the_json_the_issue_names() {
    let out = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir_in("/dev/shm").unwrap();
    let mut c = Config::quick(out.path().to_path_buf());
    c.scratch = scratch.path().to_path_buf();
    c.progress = false;
    c.reps = 1;
    c.fig1_sizes = vec![4 << 20];
    c.switch_segments = vec![1, 2];
    c.switch_rounds = 50;
    c.windows = vec![1, 3];
    c.native_window = 1 << 20;
    c.native_updates = 4096;
    c.model_window = 64 << 10;
    c.model_updates = 2048;
    c.fig6_pages = vec![4, 128];
    c.fig6_accesses = 200;
    c.cr3_loads = 100;
    let r = reproduce(&c).unwrap();
    r.write(&c).unwrap();
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("spacejmp.json")).unwrap())
            .unwrap();
    assert!(j["vas_switch_ns"].as_f64().unwrap() > 0.0);
    let mech = j["vas_switch_mechanism"].as_str().unwrap();
    assert!(mech == "pkeys" || mech == "mprotect");
    let gups = j["gups"].as_array().unwrap();
    assert_eq!(
        gups.len(),
        3 * 2 * 2 * 2,
        "designs x windows x update sets x substrates"
    );
    for g in gups {
        for k in ["design", "update_set", "windows", "substrate", "mups"] {
            assert!(!g[k].is_null(), "{k} missing in {g}");
        }
        assert!(g["mups"].as_f64().unwrap() > 0.0);
    }
    if pmlab_kvmguest::probe().is_ok() {
        assert!(
            j["cr3_load_cycles"]["untagged"].is_number(),
            "{}",
            j["cr3_load_cycles"]
        );
    }
    for f in [
        "fig1.csv",
        "fig8.csv",
        "targets.csv",
        "fig8-native.svg",
        "fig8-model.svg",
        "fig1.svg",
        "fig6.svg",
        "fig9.svg",
    ] {
        assert!(out.path().join(f).exists(), "{f}");
    }
}
