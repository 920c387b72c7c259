//! pmlab-cache: see ARCHITECTURE.md.
