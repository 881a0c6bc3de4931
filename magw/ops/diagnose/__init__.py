"""``magw diagnose``: a node check-up where every check has a verdict (pass/warn/fail) and a fix.

Each topic's verdict logic is pure (``kernel``, ``sysctl``, ``mtu``, ``clock``, ``paths``, ``shadow``,
``cni``: readings in, ``Check`` rows out), so unit tests feed readings in; ``readers`` reads a namespace
(``ip -j``, ``nft -j``, ``/proc/sys`` through setns, pings with DF set), ``node`` runs the topics on one
namespace and ``lab`` on every node of a lab. Nothing is written: the only packets sent are bounded pings.
"""
