"""The five daemons, one package each: ``app.py`` holds the logic (not knowing where state comes from),
``kube.py`` the Kubernetes wiring, ``main.py`` flags, wiring and signals (the console script's entry point);
``common`` holds the shared flags and runner. docs/daemons.md."""
