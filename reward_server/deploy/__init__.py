"""Deployments of the reward server onto engines that manage replicas for it (Ray Serve: `ray.py`)."""
