"""Serving the study: server processes, the round scheduler, gunicorn, HAProxy and
Redis, security headers and metrics."""
