"""Actions: one module each, registered by name; playbook steps call them."""
