"""Counts (parameters, caches, FLOPs), published configurations, the era table and the studies behind figures and claims."""
