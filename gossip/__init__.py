"""Wire codec, membership and failure detection, exchange protocols, aggregation rules.

Knows nothing of the model or the CLI.
"""
