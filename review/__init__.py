"""Ratchet's operator dashboard app: approvals, review cases and trace evidence."""
