"""``magw gather``: one tarball of what a bug report needs, and no secret (docs/gather.md).

- ``redact``: the second line of defence, pure: secret-looking fields and values taken out of text and documents;
- ``archive``: the tarball being written, each member with the command or file it came from (the MANIFEST);
- ``runner``: bounded subprocesses (a timeout each; a missing tool is recorded, not fatal);
- ``node``: one node's kernel objects read back with ``ip``, ``bridge``, ``nft``, ``wg``, ``sysctl``;
- ``versions``, ``diagnose``: the tools' versions and ``magw diagnose``'s report;
- ``lab``, ``kube``: a whole lab (its files, statuses, OVN rows, every node) and a cluster's API server;
- ``run``: the whole gather from the options.

The first line of defence is construction: nothing reads a private key file, a kubeconfig is summarised (never
copied), ``wg show`` hides keys, the Kubernetes mode lists no Secret and no Pod.
"""
