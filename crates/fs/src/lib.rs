//! pmlab-fs: see ARCHITECTURE.md.
