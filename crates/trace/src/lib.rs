//! pmlab-trace: see ARCHITECTURE.md.
