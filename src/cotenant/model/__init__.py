"""The pure domain: GPU models and MIG rules, nodes, pods, cluster capacity and allocation."""
