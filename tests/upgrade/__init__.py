"""The upgrade drill: the previous release, installed from this repository's own history, leaves
runs in flight on PostgreSQL; the current code takes over as runtime/docs/guides/upgrade.md says."""
