"""Pure core: parsing, series store, features, signatures, incidents, playbook model; no I/O."""
