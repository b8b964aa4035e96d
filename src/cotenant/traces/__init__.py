"""Trace loaders (Alibaba openb) and synthetic generators fitted to them."""
