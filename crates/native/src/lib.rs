//! pmlab-native: see ARCHITECTURE.md.
