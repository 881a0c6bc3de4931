"""The lab kubelet: runs the Pods created in a kube lab's API server emulators as processes in lab namespaces
(docs/lab.md, "The lab kubelet"), so that what needs pods (``magw verify --kubeconfig``, ``kubectl logs``) runs
on the lab as on a cluster."""
