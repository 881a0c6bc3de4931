"""The file broker: a directory of YAML documents as one cluster's state source (standalone and the lab), with
its lease and the controllers' writers. docs/filebroker.md."""
