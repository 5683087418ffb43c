"""The swarm handle for a training loop of the user's own (`swarmnode.Swarm`, issue 33).

- `handle`: `Swarm` and `AsyncSwarm`, what the user holds;
- `binding` (+ `torch_binding`): the user's model as one flat float32 buffer its parameters view;
- `own_worker`: the worker whose steps are the user's (`step()` is its turn);
- `own_node`: the peer (`Node`) over that worker;
- `loop_thread`: the peer's event loop, on a background thread;
- `settings`: `Swarm(**settings)` to a `PeerConfig`;
- `errors`: what the user's loop did that the swarm cannot follow.

On top of node/peer and node/train; nothing else in swarmnode imports it.
"""
