"""magw's tests, imported as the package ``tests``. Where a test goes:

- ``unit/<package>/``: pure tests of one magw package (no root); a few files also hold a ``kernel``-marked test;
- ``kernel/``: tests that need root and throwaway network namespaces (the ``kernel`` mark), but no whole lab;
- ``lab/``: tests that bring a whole lab up (``magw lab``, ``tests/support/labkit.py``);
- ``deploy/``: the manifests, RBAC, CEL rules and contracts of ``deploy/``;
- ``support/``: helper modules, never tests; a test imports these, never another test file;
- ``data/`` and ``golden/``: files the tests read.

Shared fixtures are in ``conftest.py``: ``ns``, ``ns_factory``, ``veth_pair``, ``magw_cli``, ``broker_documents``,
``daemons`` and ``ovn_dbs``.
"""
