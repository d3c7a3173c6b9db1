"""Pure core: parsing, series store, features, signatures, incidents and the playbook model (no I/O)."""
