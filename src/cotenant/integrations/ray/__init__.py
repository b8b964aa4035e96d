"""Ray: sweeps of the simulators on a Ray cluster (:mod:`.executor`), and cotenant's
placement and co-location decisions as Ray resource requests with the node agent's MPS
isolation (:mod:`.resources`).

Nothing here imports ``ray`` at import time: the resource requests are plain dictionaries
for ``.options(**...)``, and the executor imports Ray when it starts (``cotenant[ray]``).
"""
