"""The YAML snapshot: load it into ``magw.model`` values, read each field with one-line errors, check references
across items, remember the last parse (cache), and write Globalnet objects back (dump). Pure: part of the core."""
