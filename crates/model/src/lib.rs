//! pmlab-model: see ARCHITECTURE.md.
