"""One peer's own speed, and what takes from its training.

- train: one peer's training throughput (samples/s) on the selected device;
- anchors: the CPU kernels beside PyTorch (CPU) and ByzFL;
- conv2d: one train step of a small 2-D conv net against torch CPU;
- torch_vs_builtin: the same MLP built-in, as a numpy user model and through `TorchModel`;
- swarm_step: the cost of `Swarm.step()` in a user's loop, and a round's memory;
- dashboard: what the swarm page costs a peer's training (steps/s with 0 and 10 viewers).
"""
