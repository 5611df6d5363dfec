"""Invoices: fresh addresses derived from an extended public key, and their states."""
