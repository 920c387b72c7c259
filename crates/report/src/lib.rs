//! pmlab-report: see ARCHITECTURE.md.
