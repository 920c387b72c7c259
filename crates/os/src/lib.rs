//! pmlab-os: see ARCHITECTURE.md.
