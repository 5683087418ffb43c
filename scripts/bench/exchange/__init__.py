"""Bytes between peers, each figure against a baseline in the same run.

- throughput: the exchange between peer processes against raw sockets, duplex and a memory copy
  (its `node` mode is node.py, its benchmark peer process peer.py, its `--link` rows link.py);
- passes: the passes an exchange makes over a model's bytes (throughput's `--trace-passes`);
- wire: parameter frames' checksums, and a 100 MB exchange against raw loopback TCP;
- codecs: the codecs' compress + decompress throughput against a memory copy;
- seal_path: what signing adds to the critical path of a 100 MB push-pull.
"""
