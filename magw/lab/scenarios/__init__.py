"""What ``magw lab demo`` and ``magw lab fail``/``recover`` run: the demos and the failover measurements."""
