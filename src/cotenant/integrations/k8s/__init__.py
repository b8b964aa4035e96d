"""Kubernetes: a scheduler extender that places pods with cotenant's placement policies, and a
device plugin that hands the chosen GPU (share) to the container.

The extender speaks kube-scheduler's extender v1 HTTP JSON (:mod:`.wire`, :mod:`.server`); the
device plugin speaks the kubelet's ``deviceplugin/v1beta1`` gRPC (:mod:`.deviceplugin`). Both
read pods and nodes as the JSON the API server serves (dicts), so the same code handles a
scheduler's request body and an object from a watch.
"""
