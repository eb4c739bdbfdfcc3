"""Thin Ray shells over ``medagent``: Ray Data callable classes, Serve deployments and the one builder
module (``actors.builder``) that sets every replica count, CPU/GPU share and concurrency option."""
