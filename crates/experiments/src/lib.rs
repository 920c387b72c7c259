//! pmlab-experiments: see ARCHITECTURE.md.
