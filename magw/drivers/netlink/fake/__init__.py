"""``FakeNetlink``: one network namespace's netlink state in memory, failing like the kernel (the same
contract suite runs against it and the real driver). docs/diff-and-fakes.md."""
