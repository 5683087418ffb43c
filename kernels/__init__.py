"""Array backend (numpy / cupy), flat parameter buffer, NN ops, optimizers, distances.

Knows nothing of HTTP, peers or asyncio.
"""
