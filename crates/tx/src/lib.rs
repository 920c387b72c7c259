//! pmlab-tx: see ARCHITECTURE.md.
