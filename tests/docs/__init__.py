"""The documentation site cannot rot: it builds in strict mode and its tutorials run as written."""
