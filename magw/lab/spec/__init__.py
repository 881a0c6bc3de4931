"""What a lab is made of: the topology file (schema, loader, validation) and everything derived from it without
touching the host: names and addresses (naming, layout). Pure."""
