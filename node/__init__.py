"""The peer process: config, CLI, aiohttp service, training loop, data, models, checkpoints."""
